/**
 * A small, forgiving HTML -> Markdown converter for `text/html` display output.
 *
 * It reads tag soup the way a browser would in the cases that matter here (implied end
 * tags for `p`, `li`, table parts; unknown end tags ignored; `<script>`, `<style>` and
 * other non-content elements dropped with everything inside them) and writes basic
 * Markdown: headings, paragraphs, line breaks, bold/italic/strikethrough, code spans and
 * fenced blocks, links and images, nested lists, block quotes, rules and tables.
 * Text that could be read as an HTML tag (`<` before a letter, `/`, `!` or `?`) is
 * backslash-escaped, so the result never carries markup of its own. Character references
 * (all of HTML5's named ones, numeric ones as a browser reads them) are decoded by `entities`.
 * node-html-markdown and turndown were measured as replacements and kept out: both lose
 * or garble tables with implied end tags and overflow the stack on deep nesting, and
 * node-html-markdown takes seconds on a 1,000-row DataFrame (super-linear time).
 */
import stringWidth from "string-width"
import { decodeHTML, decodeHTMLAttribute } from "entities"

interface HtmlElement {
  readonly tag: string
  readonly attributes: ReadonlyMap<string, string>
  readonly children: Array<HtmlNode>
}

type HtmlNode = HtmlElement | string

/** Elements dropped with their whole content. */
const DROPPED = new Set(["script", "style", "title", "template", "noscript", "iframe", "noembed", "noframes", "svg"])
const VOID = new Set([
  "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param", "source", "track", "wbr"
])
/** Start tags that close an open paragraph. */
const CLOSES_PARAGRAPH = new Set([
  "address", "article", "aside", "blockquote", "details", "dialog", "div", "dl", "fieldset", "figcaption", "figure",
  "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "main", "menu", "nav", "ol", "p",
  "pre", "section", "summary", "table", "ul"
])
const BLOCK = new Set([
  ...CLOSES_PARAGRAPH, "body", "caption", "center", "dd", "dt", "head", "html", "legend", "li", "tbody", "td",
  "tfoot", "th", "thead", "tr"
])
/** Deeper nesting is flattened into the element at this depth. */
const MAX_DEPTH = 200
/** Table columns are padded to align up to this width. */
const MAX_ALIGNED_CELL_COLUMNS = 40

const TAG_NAME = /[A-Za-z][A-Za-z0-9:_-]*/y
const ATTRIBUTE_NAME = /[^ \t\n\f\r>/][^ \t\n\f\r>/=]*/y
const UNQUOTED_VALUE = /[^ \t\n\f\r>]*/y
const WHITESPACE = /[ \t\n\f\r]+/g

const isWhitespace = (character: string | undefined): boolean =>
  character === " " || character === "\t" || character === "\n" || character === "\f" || character === "\r"

const isLetter = (character: string | undefined): boolean =>
  character !== undefined && ((character >= "a" && character <= "z") || (character >= "A" && character <= "Z"))

interface StartTag {
  readonly tag: string
  readonly attributes: ReadonlyMap<string, string>
  readonly selfClosing: boolean
  readonly end: number
}

/** Reads the start tag at `open` (a `<` before a letter); `undefined` when the input ends inside it. */
const readStartTag = (html: string, open: number): StartTag | undefined => {
  TAG_NAME.lastIndex = open + 1
  const tag = TAG_NAME.exec(html)![0].toLowerCase()
  const attributes = new Map<string, string>()
  let position = TAG_NAME.lastIndex
  let selfClosing = false
  const skipWhitespace = () => {
    while (isWhitespace(html[position])) position++
  }
  while (position < html.length) {
    const character = html[position]
    if (character === ">") return { tag, attributes, selfClosing, end: position + 1 }
    if (character === "/") {
      selfClosing = true
      position++
      continue
    }
    if (isWhitespace(character)) {
      position++
      continue
    }
    selfClosing = false
    ATTRIBUTE_NAME.lastIndex = position
    const name = ATTRIBUTE_NAME.exec(html)![0].toLowerCase()
    position = ATTRIBUTE_NAME.lastIndex
    skipWhitespace()
    let value = ""
    if (html[position] === "=") {
      position++
      skipWhitespace()
      const quote = html[position]
      if (quote === "\"" || quote === "'") {
        const close = html.indexOf(quote, position + 1)
        if (close === -1) return undefined
        value = html.slice(position + 1, close)
        position = close + 1
      } else {
        UNQUOTED_VALUE.lastIndex = position
        value = UNQUOTED_VALUE.exec(html)![0]
        position = UNQUOTED_VALUE.lastIndex
      }
    }
    if (!attributes.has(name)) attributes.set(name, decodeHTMLAttribute(value))
  }
  return undefined
}

const closerOf = (tag: string): RegExp => new RegExp(`</${tag}(?=[\\s/>])`, "gi")
const DROPPED_CLOSERS = new Map([...DROPPED].map((tag) => [tag, closerOf(tag)]))

/** Where parsing resumes after a dropped element's content, or the end of input. */
const endOfDropped = (html: string, tag: string, from: number): number => {
  const closer = DROPPED_CLOSERS.get(tag)!
  closer.lastIndex = from
  const found = closer.exec(html)
  if (found === null) return html.length
  const close = html.indexOf(">", found.index)
  return close === -1 ? html.length : close + 1
}

/** Builds a tolerant element tree from HTML text. */
const parseHtml = (input: string): HtmlElement => {
  const html = input.replace(/\r\n?/g, "\n")
  const root: HtmlElement = { tag: "#root", attributes: new Map(), children: [] }
  const stack: Array<HtmlElement> = [root]
  const current = () => stack[stack.length - 1]!

  const appendText = (text: string) => {
    if (text.length === 0) return
    const children = current().children
    const last = children[children.length - 1]
    if (typeof last === "string") children[children.length - 1] = last + text
    else children.push(text)
  }

  const closeOpen = (tags: ReadonlySet<string>, boundaries: ReadonlySet<string>) => {
    for (let index = stack.length - 1; index > 0; index--) {
      const tag = stack[index]!.tag
      if (tags.has(tag)) {
        stack.length = index
        return
      }
      if (boundaries.has(tag)) return
    }
  }

  const openElement = (start: StartTag) => {
    const { tag } = start
    if (CLOSES_PARAGRAPH.has(tag)) closeOpen(PARAGRAPH, CELL_BOUNDARIES)
    if (tag === "li") closeOpen(LIST_ITEM, LIST_BOUNDARIES)
    else if (tag === "dt" || tag === "dd") closeOpen(DEFINITION_PARTS, DEFINITION_BOUNDARIES)
    else if (tag === "tr") closeOpen(ROW, TABLE)
    else if (tag === "td" || tag === "th") closeOpen(CELLS, ROW_BOUNDARIES)
    else if (tag === "thead" || tag === "tbody" || tag === "tfoot") closeOpen(SECTIONS, TABLE)
    else if (tag === "option") closeOpen(OPTION, SELECT)
    const element: HtmlElement = { tag, attributes: start.attributes, children: [] }
    current().children.push(element)
    if (!VOID.has(tag) && !start.selfClosing && stack.length < MAX_DEPTH) stack.push(element)
  }

  const closeElement = (tag: string) => {
    if (tag === "br") {
      current().children.push({ tag: "br", attributes: new Map(), children: [] })
      return
    }
    for (let index = stack.length - 1; index > 0; index--) {
      if (stack[index]!.tag === tag) {
        stack.length = index
        return
      }
    }
  }

  let position = 0
  while (position < html.length) {
    const open = html.indexOf("<", position)
    if (open === -1) {
      appendText(decodeHTML(html.slice(position)))
      break
    }
    appendText(decodeHTML(html.slice(position, open)))
    const next = html[open + 1]
    if (html.startsWith("<!--", open)) {
      const close = html.indexOf("-->", open + 4)
      position = close === -1 ? html.length : close + 3
    } else if (html.startsWith("<![CDATA[", open)) {
      const close = html.indexOf("]]>", open + 9)
      appendText(html.slice(open + 9, close === -1 ? html.length : close))
      position = close === -1 ? html.length : close + 3
    } else if (next === "!" || next === "?") {
      const close = html.indexOf(">", open)
      position = close === -1 ? html.length : close + 1
    } else if (next === "/" && isLetter(html[open + 2])) {
      const close = html.indexOf(">", open)
      if (close === -1) break
      TAG_NAME.lastIndex = open + 2
      closeElement(TAG_NAME.exec(html)![0].toLowerCase())
      position = close + 1
    } else if (isLetter(next)) {
      const start = readStartTag(html, open)
      if (start === undefined) break
      if (DROPPED.has(start.tag)) {
        position = endOfDropped(html, start.tag, start.end)
      } else {
        openElement(start)
        position = start.end
      }
    } else {
      appendText("<")
      position = open + 1
    }
  }
  return root
}

const PARAGRAPH = new Set(["p"])
const CELL_BOUNDARIES = new Set(["table", "td", "th", "caption", "button"])
const LIST_ITEM = new Set(["li"])
const LIST_BOUNDARIES = new Set(["ul", "ol", "menu", "table", "td", "th"])
const DEFINITION_PARTS = new Set(["dt", "dd"])
const DEFINITION_BOUNDARIES = new Set(["dl", "table", "td", "th"])
const ROW = new Set(["tr"])
const TABLE = new Set(["table"])
const CELLS = new Set(["td", "th"])
const ROW_BOUNDARIES = new Set(["tr", "table"])
const SECTIONS = new Set(["thead", "tbody", "tfoot"])
const OPTION = new Set(["option"])
const SELECT = new Set(["select", "datalist"])

const escapeText = (text: string): string => text.replace(/<(?=[A-Za-z/!?])/g, "\\<")

const collapseWhitespace = (text: string): string => text.replace(WHITESPACE, " ")

const trimSpaces = (text: string): string => text.replace(/^[ \n]+|[ \n]+$/g, "")

/** Percent-encodes the characters that would end or break a Markdown link target. */
const safeUrl = (url: string): string =>
  url.trim().replace(/[\s<>()]/g, (character) => {
    const code = character.charCodeAt(0)
    return code < 0x80 ? `%${code.toString(16).toUpperCase().padStart(2, "0")}` : encodeURIComponent(character)
  })

const isScriptUrl = (url: string): boolean => /^\s*(javascript|vbscript):/i.test(url)

/** Text of a subtree as written, for `pre` and code. */
const rawText = (node: HtmlNode): string => {
  if (typeof node === "string") return node
  if (node.tag === "br") return "\n"
  return node.children.map(rawText).join("")
}

const longestBacktickRun = (text: string): number =>
  (text.match(/`+/g) ?? []).reduce((longest, run) => Math.max(longest, run.length), 0)

const codeSpan = (text: string): string => {
  const content = collapseWhitespace(text)
  if (trimSpaces(content).length === 0) return content
  const fence = "`".repeat(longestBacktickRun(content) + 1)
  const pad = content.startsWith("`") || content.endsWith("`") ? " " : ""
  return `${fence}${pad}${content}${pad}${fence}`
}

/** Rewrites the non-blank middle of `inner`, keeping its edge whitespace outside. */
const aroundMiddle = (inner: string, rewrite: (middle: string) => string): string => {
  const middle = trimSpaces(inner)
  if (middle.length === 0) return inner
  const leading = /^[ \n]*/.exec(inner)![0]
  return leading + rewrite(middle) + inner.slice(leading.length + middle.length)
}

const emphasize = (inner: string, marker: string): string => aroundMiddle(inner, (middle) => marker + middle + marker)

const link = (element: HtmlElement, inner: string): string => {
  const href = element.attributes.get("href")?.trim() ?? ""
  if (href.length === 0 || href.startsWith("#") || isScriptUrl(href)) return inner
  const target = safeUrl(href)
  if (trimSpaces(inner).length === 0) return target
  return aroundMiddle(inner, (text) => (text === href ? `<${target}>` : `[${text.replace(/\]/g, "\\]")}](${target})`))
}

const image = (element: HtmlElement): string => {
  const alt = escapeText(collapseWhitespace(element.attributes.get("alt") ?? "").trim()).replace(/\]/g, "\\]")
  const src = element.attributes.get("src")?.trim() ?? ""
  if (src.length === 0 || isScriptUrl(src)) return alt.length > 0 ? `[image: ${alt}]` : ""
  if (src.startsWith("data:")) {
    const mime = /^data:([\w.+/-]+)/.exec(src)?.[1] ?? "image"
    return alt.length > 0 ? `[${mime}: ${alt}]` : `[${mime}]`
  }
  return `![${alt}](${safeUrl(src)})`
}

const renderInline = (node: HtmlNode): string => {
  if (typeof node === "string") return escapeText(collapseWhitespace(node))
  switch (node.tag) {
    case "br":
      return "\n"
    case "img":
      return image(node)
    case "code":
    case "kbd":
    case "samp":
    case "tt":
      return codeSpan(rawText(node))
  }
  if (BLOCK.has(node.tag)) return " " + renderElement(node).join(" ") + " "
  const inner = node.children.map(renderInline).join("")
  switch (node.tag) {
    case "strong":
    case "b":
      return emphasize(inner, "**")
    case "em":
    case "i":
    case "cite":
    case "dfn":
    case "var":
      return emphasize(inner, "*")
    case "del":
    case "s":
    case "strike":
      return emphasize(inner, "~~")
    case "a":
      return link(node, inner)
    case "q":
      return emphasize(inner, "\"")
    default:
      return inner
  }
}

/** Inline Markdown as a paragraph: lines trimmed, runs of spaces collapsed, blank edges dropped. */
const paragraph = (inline: string): string =>
  inline
    .split("\n")
    .map((line) => trimSpaces(line.replace(/ {2,}/g, " ")))
    .join("\n")
    .replace(/^\n+|\n+$/g, "")

const oneLine = (nodes: ReadonlyArray<HtmlNode>): string =>
  paragraph(nodes.map(renderInline).join("")).replace(/\n/g, " ")

const blockDescendants = new WeakMap<HtmlElement, boolean>()

/** Whether an inline element holds a block element somewhere inside (then it is laid out as blocks). */
const holdsBlock = (element: HtmlElement): boolean => {
  const known = blockDescendants.get(element)
  if (known !== undefined) return known
  const holds = element.children.some(
    (child) => typeof child !== "string" && (BLOCK.has(child.tag) || holdsBlock(child))
  )
  blockDescendants.set(element, holds)
  return holds
}

const renderBlocks = (nodes: ReadonlyArray<HtmlNode>): Array<string> => {
  const blocks: Array<string> = []
  let inline = ""
  const flush = () => {
    const text = paragraph(inline)
    if (text.length > 0) blocks.push(text)
    inline = ""
  }
  for (const node of nodes) {
    if (typeof node !== "string" && BLOCK.has(node.tag)) {
      flush()
      blocks.push(...renderElement(node))
    } else if (typeof node !== "string" && holdsBlock(node)) {
      flush()
      blocks.push(...renderBlocks(node.children))
    } else {
      inline += renderInline(node)
    }
  }
  flush()
  return blocks
}

const indentLines = (text: string, first: string, rest: string): string =>
  text
    .split("\n")
    .map((line, index) => (line.length === 0 ? "" : (index === 0 ? first : rest) + line))
    .join("\n")

const renderList = (element: HtmlElement): Array<string> => {
  const ordered = element.tag === "ol"
  let number = ordered ? Number.parseInt(element.attributes.get("start") ?? "1", 10) : 0
  if (!Number.isFinite(number)) number = 1
  const items: Array<string> = []
  for (const child of element.children) {
    if (typeof child === "string" && trimSpaces(collapseWhitespace(child)).length === 0) continue
    const isItem = typeof child !== "string" && child.tag === "li"
    const isNestedList = typeof child !== "string" && (child.tag === "ul" || child.tag === "ol")
    const body = renderBlocks(isItem ? child.children : [child]).join("\n")
    if (isNestedList && items.length > 0) {
      const indent = ordered ? "   " : "  "
      items[items.length - 1] += "\n" + indentLines(body, indent, indent)
      continue
    }
    const marker = ordered ? `${number++}. ` : "- "
    items.push(body.length === 0 ? marker.trimEnd() : indentLines(body, marker, " ".repeat(marker.length)))
  }
  return items.length === 0 ? [] : [items.join("\n")]
}

const renderPre = (element: HtmlElement): Array<string> => {
  const text = rawText(element).replace(/^\n/, "").replace(/\n+$/, "")
  if (text.trim().length === 0) return []
  const code = element.children.find((child): child is HtmlElement => typeof child !== "string" && child.tag === "code")
  const language = /(?:^|\s)lang(?:uage)?-([\w+#.-]+)/.exec(code?.attributes.get("class") ?? "")?.[1] ?? ""
  const fence = "`".repeat(Math.max(3, longestBacktickRun(text) + 1))
  return [`${fence}${language}\n${text}\n${fence}`]
}

interface TableRow {
  readonly cells: ReadonlyArray<string>
}

const cellText = (cell: HtmlElement): string =>
  trimSpaces(renderBlocks(cell.children).join(" ").replace(/\n/g, " ").replace(/ {2,}/g, " ")).replace(/\|/g, "\\|")

const spanOf = (cell: HtmlElement): number => {
  const span = Number.parseInt(cell.attributes.get("colspan") ?? "1", 10)
  return Number.isFinite(span) ? Math.min(Math.max(span, 1), 100) : 1
}

const rowOf = (cells: ReadonlyArray<HtmlElement>): TableRow => ({
  cells: cells.flatMap((cell) => [cellText(cell), ...Array<string>(spanOf(cell) - 1).fill("")])
})

const isCell = (node: HtmlNode): node is HtmlElement => typeof node !== "string" && (node.tag === "td" || node.tag === "th")

const collectRows = (element: HtmlElement, rows: Array<TableRow>, captions: Array<string>): void => {
  let loose: Array<HtmlElement> = []
  const flushLoose = () => {
    if (loose.length > 0) rows.push(rowOf(loose))
    loose = []
  }
  for (const child of element.children) {
    if (typeof child === "string") continue
    if (child.tag === "td" || child.tag === "th") {
      loose.push(child)
      continue
    }
    flushLoose()
    if (child.tag === "tr") rows.push(rowOf(child.children.filter(isCell)))
    else if (child.tag === "thead" || child.tag === "tbody" || child.tag === "tfoot") collectRows(child, rows, captions)
    else if (child.tag === "caption") captions.push(oneLine(child.children))
  }
  flushLoose()
}

const renderTable = (element: HtmlElement): Array<string> => {
  const rows: Array<TableRow> = []
  const captions: Array<string> = []
  collectRows(element, rows, captions)
  const filled = rows.filter((row) => row.cells.length > 0)
  const blocks = captions.filter((caption) => caption.length > 0)
  if (filled.length === 0) return blocks
  const columnCount = Math.max(...filled.map((row) => row.cells.length))
  const widths = Array.from({ length: columnCount }, (_, column) =>
    Math.min(
      MAX_ALIGNED_CELL_COLUMNS,
      Math.max(3, ...filled.map((row) => stringWidth(row.cells[column] ?? "", { countAnsiEscapeCodes: true })))
    ))
  const line = (cells: ReadonlyArray<string>) =>
    "| " +
    widths
      .map((width, column) => {
        const cell = cells[column] ?? ""
        return cell + " ".repeat(Math.max(0, width - stringWidth(cell, { countAnsiEscapeCodes: true })))
      })
      .join(" | ") +
    " |"
  const [header, ...body] = filled
  const separator = "| " + widths.map((width) => "-".repeat(width)).join(" | ") + " |"
  blocks.push([line(header!.cells), separator, ...body.map((row) => line(row.cells))].join("\n"))
  return blocks
}

const renderElement = (element: HtmlElement): Array<string> => {
  const heading = /^h([1-6])$/.exec(element.tag)
  if (heading !== null) {
    const text = oneLine(element.children)
    return text.length === 0 ? [] : [`${"#".repeat(Number(heading[1]))} ${text}`]
  }
  switch (element.tag) {
    case "ul":
    case "ol":
    case "menu":
      return renderList(element)
    case "li":
      return renderList({ tag: "ul", attributes: new Map(), children: [element] })
    case "pre":
      return renderPre(element)
    case "hr":
      return ["---"]
    case "table":
      return renderTable(element)
    case "blockquote": {
      const body = renderBlocks(element.children).join("\n\n")
      return body.length === 0 ? [] : [body.split("\n").map((line) => (line.length === 0 ? ">" : `> ${line}`)).join("\n")]
    }
    case "dd": {
      const body = renderBlocks(element.children).join("\n")
      return body.length === 0 ? [] : [indentLines(body, ": ", "  ")]
    }
    default:
      return renderBlocks(element.children)
  }
}

/** Converts HTML to basic Markdown; never throws, and drops scripts and styles entirely. */
export const htmlToMarkdown = (html: string): string =>
  renderBlocks(parseHtml(html).children)
    .join("\n\n")
    .replace(/\u00a0/g, " ")
    .replace(/^\n+|\n+$/g, "")
