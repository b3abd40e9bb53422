/**
 * Decoding HTML character references: numeric (`&#38;`, `&#x26;`) and the named ones
 * that turn up in rendered output. An unknown name is left as written.
 */

const NAMED: Readonly<Record<string, string>> = {
  amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: "\u00a0",
  ensp: "\u2002", emsp: "\u2003", thinsp: "\u2009", zwnj: "\u200c", zwj: "\u200d", lrm: "\u200e", rlm: "\u200f",
  shy: "\u00ad", copy: "©", reg: "®", trade: "™", hellip: "…", mdash: "—", ndash: "–", minus: "−",
  lsquo: "‘", rsquo: "’", sbquo: "‚", ldquo: "“", rdquo: "”", bdquo: "„", laquo: "«", raquo: "»",
  lsaquo: "‹", rsaquo: "›", bull: "•", middot: "·", deg: "°", plusmn: "±", times: "×", divide: "÷",
  micro: "µ", para: "¶", sect: "§", cent: "¢", pound: "£", yen: "¥", euro: "€", curren: "¤",
  iexcl: "¡", iquest: "¿", not: "¬", macr: "¯", acute: "´", cedil: "¸", ordf: "ª", ordm: "º",
  sup1: "¹", sup2: "²", sup3: "³", frac14: "¼", frac12: "½", frac34: "¾", permil: "‰",
  dagger: "†", Dagger: "‡", prime: "′", Prime: "″", check: "✓", cross: "✗",
  larr: "←", rarr: "→", uarr: "↑", darr: "↓", harr: "↔", lArr: "⇐", rArr: "⇒", hArr: "⇔",
  le: "≤", ge: "≥", ne: "≠", asymp: "≈", equiv: "≡", infin: "∞", sum: "∑", prod: "∏", radic: "√",
  part: "∂", nabla: "∇", isin: "∈", notin: "∉", cap: "∩", cup: "∪", and: "∧", or: "∨",
  forall: "∀", exist: "∃", empty: "∅", sdot: "⋅",
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", zeta: "ζ", eta: "η", theta: "θ",
  iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν", xi: "ξ", omicron: "ο", pi: "π", rho: "ρ",
  sigma: "σ", tau: "τ", upsilon: "υ", phi: "φ", chi: "χ", psi: "ψ", omega: "ω",
  Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Pi: "Π", Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω",
  aacute: "á", eacute: "é", iacute: "í", oacute: "ó", uacute: "ú", yacute: "ý",
  Aacute: "Á", Eacute: "É", Iacute: "Í", Oacute: "Ó", Uacute: "Ú",
  agrave: "à", egrave: "è", igrave: "ì", ograve: "ò", ugrave: "ù", Agrave: "À", Egrave: "È",
  acirc: "â", ecirc: "ê", icirc: "î", ocirc: "ô", ucirc: "û",
  auml: "ä", euml: "ë", iuml: "ï", ouml: "ö", uuml: "ü", yuml: "ÿ", Auml: "Ä", Ouml: "Ö", Uuml: "Ü",
  atilde: "ã", ntilde: "ñ", otilde: "õ", Ntilde: "Ñ", ccedil: "ç", Ccedil: "Ç", szlig: "ß",
  aring: "å", Aring: "Å", aelig: "æ", AElig: "Æ", oslash: "ø", Oslash: "Ø", oelig: "œ", OElig: "Œ"
}

/** Names browsers also accept without the closing semicolon. */
const LEGACY_WITHOUT_SEMICOLON: ReadonlySet<string> = new Set(["amp", "lt", "gt", "quot", "nbsp"])

/** Code points 0x80-0x9F in a numeric reference mean their windows-1252 characters. */
const WINDOWS_1252: Readonly<Record<number, number>> = {
  0x80: 0x20ac, 0x82: 0x201a, 0x83: 0x0192, 0x84: 0x201e, 0x85: 0x2026, 0x86: 0x2020, 0x87: 0x2021,
  0x88: 0x02c6, 0x89: 0x2030, 0x8a: 0x0160, 0x8b: 0x2039, 0x8c: 0x0152, 0x8e: 0x017d, 0x91: 0x2018,
  0x92: 0x2019, 0x93: 0x201c, 0x94: 0x201d, 0x95: 0x2022, 0x96: 0x2013, 0x97: 0x2014, 0x98: 0x02dc,
  0x99: 0x2122, 0x9a: 0x0161, 0x9b: 0x203a, 0x9c: 0x0153, 0x9e: 0x017e, 0x9f: 0x0178
}

const REFERENCE = /&(?:#([0-9]{1,8})|#[xX]([0-9a-fA-F]{1,8})|([A-Za-z][A-Za-z0-9]{1,31}))(;?)/g

const fromCodePoint = (code: number): string => {
  if (code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return "\ufffd"
  return String.fromCodePoint(WINDOWS_1252[code] ?? code)
}

/** Replaces character references with the characters they stand for. */
export const decodeEntities = (text: string): string =>
  text.includes("&")
    ? text.replace(REFERENCE, (whole, decimal?: string, hex?: string, name?: string, semicolon?: string) => {
      if (decimal !== undefined) return fromCodePoint(Number.parseInt(decimal, 10))
      if (hex !== undefined) return fromCodePoint(Number.parseInt(hex, 16))
      if (name === undefined || !Object.hasOwn(NAMED, name)) return whole
      return semicolon === ";" || LEGACY_WITHOUT_SEMICOLON.has(name) ? NAMED[name]! : whole
    })
    : text
