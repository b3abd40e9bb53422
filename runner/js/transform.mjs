/** Cell source rewriting: static imports and import() that work in a classic REPL-mode script. */

export const IMPORT_NAME = "__veyyonImport"

// Cell source: imports that work in a classic script

const REGEX_AFTER = new Set(["return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do", "else", "yield", "await", "extends"])
const NAME_START = /[A-Za-z_$\u0080-\uffff]/
const NAME_PART = /[\w$\u0080-\uffff]/

const skipTrivia = (source, start) => {
  let i = start
  while (i < source.length) {
    const c = source[i]
    if (c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f" || c === "\v" || c === "\u00a0" || c === "\ufeff" || c === "\u2028" || c === "\u2029") {
      i++
    } else if (c === "/" && source[i + 1] === "/") {
      while (i < source.length && source[i] !== "\n") i++
    } else if (c === "/" && source[i + 1] === "*") {
      const end = source.indexOf("*/", i + 2)
      i = end < 0 ? source.length : end + 2
    } else {
      break
    }
  }
  return i
}

const skipString = (source, start) => {
  const quote = source[start]
  let i = start + 1
  while (i < source.length && source[i] !== quote) {
    if (source[i] === "\\") i++
    else if (source[i] === "\n") return i
    i++
  }
  return i + 1
}

const readName = (source, start) => {
  let i = start
  if (i >= source.length || !NAME_START.test(source[i])) return undefined
  while (i < source.length && NAME_PART.test(source[i])) i++
  return { name: source.slice(start, i), end: i }
}

const parseSpecifiers = (source, start) => {
  const parts = []
  let i = skipTrivia(source, start + 1)
  while (source[i] !== "}") {
    let imported
    if (source[i] === "'" || source[i] === '"') {
      const end = skipString(source, i)
      imported = { text: source.slice(i, end), name: undefined }
      i = end
    } else {
      const read = readName(source, i)
      if (read === undefined) return undefined
      imported = { text: read.name, name: read.name }
      i = read.end
    }
    i = skipTrivia(source, i)
    let local = imported.name
    const as = readName(source, i)
    if (as?.name === "as") {
      const read = readName(source, skipTrivia(source, as.end))
      if (read === undefined) return undefined
      local = read.name
      i = skipTrivia(source, read.end)
    }
    if (local === undefined) return undefined
    parts.push(imported.text === local ? local : `${imported.text}: ${local}`)
    if (source[i] === ",") i = skipTrivia(source, i + 1)
    else if (source[i] !== "}") return undefined
  }
  return { pattern: `{ ${parts.join(", ")} }`, end: i + 1 }
}

const skipBalanced = (source, start) => {
  let depth = 0
  let i = start
  while (i < source.length) {
    const c = source[i]
    if (c === "'" || c === '"') {
      i = skipString(source, i)
      continue
    }
    if (c === "{") depth++
    else if (c === "}" && --depth === 0) return i + 1
    i++
  }
  return undefined
}

/** Parses the rest of a static import statement at `start` (just past `import`); undefined when it is not one. */
const parseImportStatement = (source, start) => {
  let i = skipTrivia(source, start)
  let bindings = []
  if (source[i] !== "'" && source[i] !== '"') {
    const first = readName(source, i)
    if (first !== undefined) {
      if (first.name === "from") return undefined
      bindings.push({ kind: "default", local: first.name })
      i = skipTrivia(source, first.end)
      if (source[i] === ",") i = skipTrivia(source, i + 1)
    }
    if (source[i] === "*") {
      const as = readName(source, skipTrivia(source, i + 1))
      if (as?.name !== "as") return undefined
      const local = readName(source, skipTrivia(source, as.end))
      if (local === undefined) return undefined
      bindings.push({ kind: "namespace", local: local.name })
      i = skipTrivia(source, local.end)
    } else if (source[i] === "{") {
      const specifiers = parseSpecifiers(source, i)
      if (specifiers === undefined) return undefined
      bindings.push({ kind: "named", pattern: specifiers.pattern })
      i = skipTrivia(source, specifiers.end)
    }
    if (bindings.length === 0) return undefined
    const from = readName(source, i)
    if (from?.name !== "from") return undefined
    i = skipTrivia(source, from.end)
  }
  if (source[i] !== "'" && source[i] !== '"') return undefined
  const specEnd = skipString(source, i)
  const specifier = source.slice(i, specEnd)
  let end = specEnd
  let options = ""
  const next = skipTrivia(source, specEnd)
  const keyword = readName(source, next)
  if (keyword !== undefined && (keyword.name === "with" || keyword.name === "assert")) {
    const open = skipTrivia(source, keyword.end)
    const close = source[open] === "{" ? skipBalanced(source, open) : undefined
    if (close === undefined) return undefined
    options = `, { ${keyword.name}: ${source.slice(open, close)} }`
    end = close
  }
  const semicolon = skipTrivia(source, end)
  if (source[semicolon] === ";" && !source.slice(end, semicolon).includes("\n")) end = semicolon + 1
  const load = `await ${IMPORT_NAME}(${specifier}${options})`
  const namespace = bindings.find((b) => b.kind === "namespace")
  const defaultBinding = bindings.find((b) => b.kind === "default")
  const named = bindings.find((b) => b.kind === "named")
  let code
  if (bindings.length === 0) code = `${load};`
  else if (namespace !== undefined) {
    code = `const ${namespace.local} = ${load};` + (defaultBinding ? ` const ${defaultBinding.local} = ${namespace.local}.default;` : "")
  } else {
    const members = []
    if (defaultBinding) members.push(`default: ${defaultBinding.local}`)
    if (named) members.push(named.pattern.slice(2, -2))
    code = `const { ${members.filter(Boolean).join(", ")} } = ${load};`
  }
  return { code, end }
}

/**
 * Rewrites a cell so it runs as a classic script: `import(` becomes a loader that resolves
 * from the kernel's working directory, and top-level `import ... from "x"` statements become
 * `const` bindings of awaited imports. Strings, comments, templates and regular expressions
 * are left alone; line breaks are kept, so error positions still match the cell.
 */
export const transformCell = (source) => {
  const edits = []
  let i = source.startsWith("#!") ? source.indexOf("\n") : 0
  if (i < 0) return source
  let prev = null
  let braces = 0
  let nesting = 0
  const templates = []

  const scanTemplate = (start) => {
    let j = start
    while (j < source.length) {
      const c = source[j]
      if (c === "\\") j += 2
      else if (c === "`") return { end: j + 1, open: false }
      else if (c === "$" && source[j + 1] === "{") return { end: j + 2, open: true }
      else j++
    }
    return { end: j, open: false }
  }
  const afterTemplate = (scan) => {
    if (scan.open) {
      braces++
      templates.push(braces)
      prev = { type: "punct", value: "{" }
    } else {
      prev = { type: "literal" }
    }
    return scan.end
  }

  while (i < source.length) {
    const next = skipTrivia(source, i)
    if (next !== i) {
      i = next
      continue
    }
    const c = source[i]
    if (c === "'" || c === '"') {
      i = skipString(source, i)
      prev = { type: "literal" }
    } else if (c === "`") {
      i = afterTemplate(scanTemplate(i + 1))
    } else if (c === "}" && templates.length > 0 && templates[templates.length - 1] === braces) {
      templates.pop()
      braces--
      i = afterTemplate(scanTemplate(i + 1))
    } else if (c === "/" && (prev === null || (prev.type === "punct" && prev.value !== ")" && prev.value !== "]") || (prev.type === "name" && REGEX_AFTER.has(prev.value)))) {
      let j = i + 1
      let inClass = false
      while (j < source.length && source[j] !== "\n") {
        if (source[j] === "\\") j++
        else if (source[j] === "[") inClass = true
        else if (source[j] === "]") inClass = false
        else if (source[j] === "/" && !inClass) break
        j++
      }
      if (source[j] === "/") {
        j++
        while (j < source.length && NAME_PART.test(source[j])) j++
        i = j
        prev = { type: "literal" }
      } else {
        i++
        prev = { type: "punct", value: "/" }
      }
    } else if (NAME_START.test(c)) {
      const read = readName(source, i)
      const member = prev?.type === "punct" && (prev.value === "." || prev.value === "?.")
      if (read.name === "import" && !member) {
        const after = skipTrivia(source, read.end)
        if (source[after] === "(") {
          edits.push({ start: i, end: read.end, code: IMPORT_NAME })
        } else if (source[after] !== "." && braces === 0 && nesting === 0) {
          const statement = parseImportStatement(source, read.end)
          if (statement !== undefined) {
            edits.push({ start: i, end: statement.end, code: statement.code })
            i = statement.end
            prev = { type: "punct", value: ";" }
            continue
          }
        }
      }
      i = read.end
      prev = { type: "name", value: read.name }
    } else if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(source[i + 1] ?? ""))) {
      let j = i + 1
      while (j < source.length && (NAME_PART.test(source[j]) || source[j] === "." || ((source[j] === "+" || source[j] === "-") && /[eE]/.test(source[j - 1])))) j++
      i = j
      prev = { type: "literal" }
    } else {
      let value = c
      if (c === "?" && source[i + 1] === "." && !/[0-9]/.test(source[i + 2] ?? "")) value = "?."
      else if (c === "." && source[i + 1] === "." && source[i + 2] === ".") value = "..."
      if (c === "{") braces++
      else if (c === "}") braces--
      else if (c === "(" || c === "[") nesting++
      else if (c === ")" || c === "]") nesting--
      i += value.length
      prev = { type: "punct", value }
    }
  }
  if (edits.length === 0) return source
  let out = ""
  let at = 0
  for (const edit of edits) {
    const replaced = source.slice(edit.start, edit.end)
    out += source.slice(at, edit.start) + edit.code + "\n".repeat(replaced.split("\n").length - 1)
    at = edit.end
  }
  return out + source.slice(at)
}

// ---------------------------------------------------------------------------
