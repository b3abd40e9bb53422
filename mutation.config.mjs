/**
 * The modules `npm run test:mutation` mutates, each with its own test files, and the
 * survivors that are truly equivalent (the mutated program behaves the same), each with
 * why. An entry matches a survivor by mutator, a piece of the replaced source and,
 * when given, the replacement.
 */
const FAST_PATH = "the ASCII fast path: the general path gives the same answer, only slower"
const NO_MAGIC_FAST_PATH = "a cell or line without the characters a magic needs skips work that would find no magic"
const SCANNER_END = "each pass of the scanner starts with a search from pos, which finds nothing at or past the line's end and leaves the loop"

export default {
  threshold: 90,
  modules: [
    {
      module: "src/kernel/Lifecycle.ts",
      tests: ["test/kernel/Lifecycle.test.ts", "test/kernel/Lifecycle.model.test.ts"],
      equivalent: [
        {
          mutator: "ConditionalExpression",
          original: 'state._tag === "Busy" || state._tag === "Interrupting"',
          replacement: "true",
          reason: "the other states carry no requestId, so reading it from them gives undefined as the else branch does"
        }
      ]
    },
    {
      module: "src/kernel/CellWatchdog.ts",
      tests: ["test/kernel/CellWatchdog.test.ts"],
      equivalent: [
        {
          mutator: "ConditionalExpression",
          original: "handle !== undefined",
          replacement: "true",
          reason: "clearTimeout(undefined) does nothing, so clearing without the check behaves the same"
        }
      ]
    },
    {
      module: "src/services/isolation/EnvPolicy.ts",
      tests: ["test/services/isolation/EnvPolicy.test.ts", "test/services/isolation/EnvPolicy.rules.test.ts"],
      equivalent: [
        {
          mutator: "ConditionalExpression",
          original: "options.fixed !== undefined",
          replacement: "true",
          reason: "Object.assign(env, undefined) copies nothing, so assigning without the check behaves the same"
        }
      ]
    },
    {
      module: "src/services/isolation/SandboxArgs.ts",
      tests: ["test/services/isolation/Sandbox.test.ts"],
      equivalent: [
        {
          mutator: "BlockStatement",
          original: "return undefined",
          reason: "an empty catch block returns undefined too"
        }
      ]
    },
    { module: "src/kernel/WatchdogBudget.ts", tests: ["test/kernel/WatchdogBudget.test.ts"] },
    {
      module: "runner/python/_veyyon_runner/transform.py",
      tests: [
        "runner/python/tests/test_transform.py",
        "runner/python/tests/test_transform_model.py",
        "runner/python/tests/test_transform_cases.py"
      ],
      equivalent: [
        { mutator: "ConditionalExpression", original: "pos < end", replacement: "True", reason: SCANNER_END },
        { mutator: "EqualityOperator", original: "pos < end", replacement: "pos <= end", reason: SCANNER_END },
        {
          mutator: "StringLiteral",
          original: '""',
          replacement: '"Stryker was here!"',
          reason: "in a plain string's search set, extra characters fall to the branch that steps over one character, as text the search skips"
        },
        {
          mutator: "StringLiteral",
          original: '"c"',
          replacement: '""',
          reason: "a kind that is neither string, format spec nor expression is scanned as code, as \"c\" is"
        },
        {
          mutator: "ConditionalExpression",
          original: 'char == "{"',
          replacement: "True",
          reason: "a } in an f-string's text comes doubled in valid code, and opening a field at the first that the second closes steps the same"
        },
        {
          mutator: "ConditionalExpression",
          original: "pos + 1 >= end",
          replacement: "True",
          reason: "outside a string a backslash is valid only as the line's last character"
        },
        {
          mutator: "EqualityOperator",
          original: "pos - start < 2",
          replacement: "pos - start <= 2",
          reason: "a string prefix has at most two letters; a third letter before a quote is a keyword's or a syntax error"
        },
        { mutator: "StringLiteral", original: '"<field>"', replacement: '""', reason: "the file name shows only in a syntax error, which is caught" },
        { mutator: "BooleanLiteral", original: "True", replacement: "False", reason: "transform.py has no __future__ import for compile to inherit" },
        { mutator: "StringLiteral", original: '"="', replacement: '""', reason: NO_MAGIC_FAST_PATH },
        { mutator: "StringLiteral", original: '"!"', replacement: '""', reason: NO_MAGIC_FAST_PATH },
        { mutator: "StringLiteral", original: '"%"', replacement: '""', reason: NO_MAGIC_FAST_PATH },
        { mutator: "ConditionalExpression", original: '"=" not in stripped', replacement: "False", reason: NO_MAGIC_FAST_PATH },
        { mutator: "ConditionalExpression", original: '"!" in stripped or "%" in stripped', replacement: "True", reason: NO_MAGIC_FAST_PATH },
        {
          mutator: "LogicalOperator",
          original: '"=" not in stripped or not ("!" in stripped or "%" in stripped)',
          replacement: '"=" not in stripped and not ("!" in stripped or "%" in stripped)',
          reason: NO_MAGIC_FAST_PATH
        },
        { mutator: "BlockStatement", original: "return None, 0", reason: NO_MAGIC_FAST_PATH },
        { mutator: "ConditionalExpression", original: '"%" not in source and "!" not in source', replacement: "False", reason: NO_MAGIC_FAST_PATH },
        { mutator: "BlockStatement", original: "return source", reason: NO_MAGIC_FAST_PATH },
        { mutator: "BlockStatement", original: "return None", reason: "falling off the end of the function returns None too" }
      ]
    },
    {
      module: "src/kernel/RequestTable.ts",
      tests: ["test/kernel/RequestTable.model.test.ts", "test/kernel/offerNow.test.ts"],
      equivalent: [
        {
          mutator: "ConditionalExpression",
          original: "fields.cwd === undefined",
          replacement: "false",
          reason: "a cwd of undefined spread into the line is dropped by JSON.stringify, as the empty object is"
        },
        {
          mutator: "ConditionalExpression",
          original: 'frame.type === "error"',
          replacement: "true",
          reason: "the frame decoder gives every other frame kind a string id, so only an error frame can lack one"
        },
        {
          mutator: "ConditionalExpression",
          original: 'typeof frame.id === "string"',
          replacement: "true",
          reason: "only an error frame can lack a string id, and one without an id was handled just above"
        }
      ]
    },
    {
      module: "src/services/registry/RcMapHolds.ts",
      tests: ["test/services/registry/RcMapHolds.test.ts", "test/services/registry/RcMapHolds.model.test.ts"],
      equivalent: [
        {
          mutator: "ConditionalExpression",
          original: "holds.get(key) === hold",
          replacement: "true",
          reason: "a hold not yet ended is the one its key maps to: a hold is added only for a key without one and removed only when it ends"
        },
        {
          mutator: "ConditionalExpression",
          original: "hold.dropped",
          replacement: "false",
          reason: "in sweep: ending a hold interrupts its sweeper, or the sweeper is the one ending it and stops, so no sweeper looks at an ended hold"
        },
        {
          mutator: "ArithmeticOperator",
          original: "clock.currentTimeMillisUnsafe() + idleTtlMs",
          replacement: "clock.currentTimeMillisUnsafe() - idleTtlMs",
          reason: "a hold is taken for a use that is still running when its sweeper first looks, and that use's end sets the idle deadline anew, so the first deadline is never read while the hold is idle"
        }
      ]
    },
    {
      module: "src/services/registry/SparePool.ts",
      tests: ["test/services/registry/SparePool.model.test.ts"],
      equivalent: [
        {
          mutator: "ConditionalExpression",
          original: "spec.size <= 0",
          replacement: "false",
          reason: "with a size of zero or less nothing is missing, which the next check returns on"
        },
        {
          mutator: "EqualityOperator",
          original: "spec.size <= 0",
          replacement: "spec.size < 0",
          reason: "with a size of zero nothing is missing, which the next check returns on"
        },
        {
          mutator: "EqualityOperator",
          original: "missing <= 0",
          replacement: "missing < 0",
          reason: "with none missing no serial is made and no spawn is forked"
        },
        {
          mutator: "ConditionalExpression",
          original: "missing <= 0",
          replacement: "false",
          reason: "with none missing (or fewer, after a smaller size) no serial is made, since an array of a length below one is empty, and no spawn is forked"
        },
        {
          mutator: "UpdateOperator",
          original: "generation++",
          replacement: "generation--",
          reason: "a generation is only compared for equality, and counting down gives each shutdown a new one too"
        },
        {
          mutator: "UpdateOperator",
          original: "++serial",
          replacement: "--serial",
          reason: "a spawn's serial is only looked up in its pool's set, and counting down gives each spawn a new one too"
        }
      ]
    },
    { module: "src/cluster/LedgerDecision.ts", tests: ["test/cluster/LedgerDecision.test.ts", "test/cluster/LedgerDecision.model.test.ts"] },
    { module: "src/cluster/LedgerRowFormat.ts", tests: ["test/cluster/LedgerRowFormat.test.ts"] },
    { module: "src/cluster/LedgerCache.ts", tests: ["test/cluster/LedgerCache.test.ts"] },
    {
      module: "src/render/Columns.ts",
      tests: ["test/render/Columns.test.ts"],
      equivalent: [
        { mutator: "ConditionalExpression", original: "PRINTABLE_ASCII.test(text)", replacement: "false", reason: FAST_PATH },
        { mutator: "ConditionalExpression", original: "PRINTABLE_ASCII.test(line) && line.length <= limit", replacement: "false", reason: FAST_PATH },
        { mutator: "EqualityOperator", original: "line.length <= limit", replacement: "line.length < limit", reason: FAST_PATH },
        {
          mutator: "BooleanLiteral",
          original: "true",
          replacement: "false",
          reason: "textColumns measures text tokens, which hold no escape sequence, so string-width's escape handling never applies"
        },
        {
          mutator: "ObjectLiteral",
          original: "{ countAnsiEscapeCodes: true }",
          reason: "textColumns measures text tokens, which hold no escape sequence, so string-width's escape handling never applies"
        },
        {
          mutator: "ObjectLiteral",
          original: '{ granularity: "grapheme" }',
          reason: "grapheme is Intl.Segmenter's default granularity"
        },
        {
          mutator: "ObjectLiteral",
          original: "{ text, columns, style }",
          replacement: "{}",
          reason: "prefixWithin's last return: clampLine asks for a prefix only of lines wider than the budget, so the loop always returns first"
        },
        {
          mutator: "ConditionalExpression",
          original: "digitCount(first.omitted) < digitCount(total)",
          replacement: "true",
          reason: "a second cut with the same suffix width is the first cut again"
        },
        {
          mutator: "EqualityOperator",
          original: "digitCount(first.omitted) < digitCount(total)",
          replacement: "digitCount(first.omitted) <= digitCount(total)",
          reason: "a second cut with the same suffix width is the first cut again"
        }
      ]
    },
    {
      module: "src/backends/python/RuntimeResolution.ts",
      tests: ["test/backends/python/RuntimeResolution.test.ts"],
      equivalent: [
        {
          mutator: "StringLiteral",
          original: '"venv"',
          replacement: '""',
          reason: "envInterpreter asks only whether the kind is conda, so any other kind is a venv"
        },
        {
          mutator: "ConditionalExpression",
          original: "attempt.target !== undefined",
          replacement: "true",
          reason: "a missing outcome always names its target; only unset attempts have none"
        }
      ]
    },
    {
      module: "src/services/tool/ParamsProblem.ts",
      tests: ["test/mcp/framing.test.ts", "test/services/tool/ParamsProblem.test.ts"],
      equivalent: [
        {
          mutator: "StringLiteral",
          original: '""',
          replacement: '"Stryker was here!"',
          reason: "the hint key of an issue at the top level (empty path): hints have no key for it under either name"
        }
      ]
    },
    {
      module: "src/services/output/TextWindow.ts",
      tests: ["test/services/output/TextWindow.test.ts"],
      equivalent: [
        { mutator: "StringLiteral", original: '"utf8"', reason: "Buffer.byteLength takes an empty encoding as UTF-8" },
        {
          mutator: "BooleanLiteral",
          original: "false",
          reason: "a span's endsWithNewline is read before anything was added only for the omitted text, and a spilled window has always omitted some"
        },
        { mutator: "ConditionalExpression", original: "at + 1 < text.length", reason: "charCodeAt past the end is NaN, which is no low surrogate" },
        { mutator: "EqualityOperator", original: "at + 1 < text.length", reason: "charCodeAt past the end is NaN, which is no low surrogate" },
        { mutator: "ArithmeticOperator", original: "at + 1", reason: "at - 1 is always inside the text, so the check passes as the real one does where it matters; charCodeAt past the end is NaN" },
        { mutator: "ConditionalExpression", original: "limit <= 0", reason: FAST_PATH },
        { mutator: "EqualityOperator", original: "limit <= 0", reason: FAST_PATH },
        { mutator: "ConditionalExpression", original: "total <= limit", reason: FAST_PATH },
        { mutator: "EqualityOperator", original: "total <= limit", reason: FAST_PATH },
        { mutator: "ConditionalExpression", original: "total === text.length", reason: FAST_PATH },
        { mutator: "ConditionalExpression", original: "need >= total", reason: FAST_PATH },
        { mutator: "EqualityOperator", original: "need >= total", reason: FAST_PATH },
        {
          mutator: "EqualityOperator",
          original: "at < text.length",
          reason: "the loops stop on their byte count first: the text holds more than the limit, or at least the bytes needed"
        },
        {
          mutator: "ConditionalExpression",
          original: "at < text.length",
          replacement: "true",
          reason: "the loop stops on its byte count first: the text holds at least the bytes needed"
        },
        { mutator: "ConditionalExpression", original: "slice.length * 2 < parentLength", reason: "detach copies or not: the text is the same, only what it keeps alive differs" },
        { mutator: "EqualityOperator", original: "slice.length * 2 < parentLength", reason: "detach copies or not: the text is the same, only what it keeps alive differs" },
        { mutator: "ArithmeticOperator", original: "slice.length * 2", reason: "detach copies or not: the text is the same, only what it keeps alive differs" },
        {
          mutator: "EqualityOperator",
          original: "tailStart < tailEntries.length",
          reason: "with no entries left the tail is empty, so within its budgets, and the loop stops there"
        },
        { mutator: "ConditionalExpression", original: "overLines > 0", reason: "cutting after zero newlines cuts nothing" },
        { mutator: "EqualityOperator", original: "overLines > 0", reason: "cutting after zero newlines cuts nothing" },
        { mutator: "ConditionalExpression", original: "overBytes > 0", reason: "reaching zero bytes cuts nothing" },
        { mutator: "EqualityOperator", original: "overBytes > 0", reason: "reaching zero bytes cuts nothing" },
        { mutator: "EqualityOperator", original: "tailStart > 64", reason: "compacting a few slots earlier or later changes only memory" },
        {
          mutator: "ConditionalExpression",
          original: "tailStart * 2 > tailEntries.length",
          replacement: "true",
          reason: "compacting the dropped slots more often changes only memory"
        },
        { mutator: "EqualityOperator", original: "tailStart * 2 > tailEntries.length", reason: "compacting at exactly half changes only memory" },
        { mutator: "ConditionalExpression", original: "newlinesLeft <= 0", reason: "cutting after zero newlines gives 0 as the check does" },
        { mutator: "EqualityOperator", original: "newlinesLeft <= 0", reason: "cutting after zero newlines gives 0 as the check does" },
        { mutator: "AssignmentOperator", original: "last.bytes -= removedBytes", reason: "the snap runs at the end: nothing reads an entry's counts after it" },
        { mutator: "AssignmentOperator", original: "last.newlines -= 1", reason: "the snap runs at the end: nothing reads an entry's counts after it" },
        { mutator: "ConditionalExpression", original: "spilled", replacement: "false", reason: "a second spill finds nothing held before the first, so it changes nothing" }
      ]
    }
  ]
}
