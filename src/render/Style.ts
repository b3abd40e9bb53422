/**
 * Plain SGR colouring for the terminal renderers, switched off as a whole when colour
 * is not wanted (then every function returns its input unchanged).
 */

/** Colouring functions; each wraps a single line of text. */
export interface Style {
  readonly enabled: boolean
  readonly bold: (text: string) => string
  readonly dim: (text: string) => string
  readonly red: (text: string) => string
  readonly green: (text: string) => string
  readonly yellow: (text: string) => string
  readonly cyan: (text: string) => string
}

const sgr = (open: number, close: number) => (text: string): string =>
  text.length === 0 ? text : `\u001b[${open}m${text}\u001b[${close}m`

const identity = (text: string): string => text

/** Colouring with ANSI codes when `enabled`, or none at all. */
export const makeStyle = (enabled: boolean): Style =>
  enabled
    ? {
      enabled,
      bold: sgr(1, 22),
      dim: sgr(2, 22),
      red: sgr(31, 39),
      green: sgr(32, 39),
      yellow: sgr(33, 39),
      cyan: sgr(36, 39)
    }
    : { enabled, bold: identity, dim: identity, red: identity, green: identity, yellow: identity, cyan: identity }

/** Applies `paint` to every non-empty stretch between line breaks and carriage returns. */
export const paintLines = (text: string, paint: (stretch: string) => string): string =>
  text
    .split(/(\r\n|\r|\n)/)
    .map((piece, index) => (index % 2 === 1 ? piece : paint(piece)))
    .join("")
