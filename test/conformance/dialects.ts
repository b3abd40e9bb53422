/**
 * The same small programs in each runner's language, so one conformance suite can drive
 * every runner: what differs between languages is spelled here and nowhere else.
 */

const J = JSON.stringify

/** One language's spelling of the programs the conformance suite runs. */
export interface Dialect {
  /** Prints text and a newline to the cell's stdout. */
  readonly print: (text: string) => string
  /** Writes text and a newline to the cell's stderr. */
  readonly printErr: (text: string) => string
  /** Binds name to an integer so later cells see it, with no result. */
  readonly assign: (name: string, value: number) => string
  /** Raises an exception with message; `errorName` is its ename. */
  readonly raise: (message: string) => string
  readonly errorName: string
  /** Prints marker, then spins until interrupted. */
  readonly spin: (marker: string) => string
  /** Displays the explicit MIME bundle {"text/html": html}. */
  readonly displayHtml: (html: string) => string
  /** Prints the working directory, then the variable's value or "unset". */
  readonly cwdAndEnv: (name: string) => string
  /** Runs `echo text` as a child process sharing the cell's stdout, with no result. */
  readonly childEcho: (text: string) => string
  /** Calls completion(prompt); the cell's result is the answer. */
  readonly completion: (prompt: string) => string
  /** Stores KV_VALUE under key. */
  readonly kvSet: (key: string) => string
  /** Prints the value stored under key as compact JSON. */
  readonly kvPrint: (key: string) => string
  /** An expression whose result identifies the kv object (the same after a second prelude run). */
  readonly kvIdentity: string
  /**
   * Writes the lines "0" to `${count - 1}` to stdout, taking turns: the language's print, a child
   * process sharing the cell's stdout, its stream's write, and a raw write to fd 1.
   */
  readonly mixedWrites: (count: number) => string
  /** Whether a trailing `;` suppresses the result (py, rb); in JS every statement ends in one. */
  readonly semicolonSuppresses: boolean
}

/** The value every dialect's kvSet stores, as compact JSON. */
export const KV_VALUE_JSON = `[1,"ü",{"a":null,"b":true}]`

const python: Dialect = {
  print: (text) => `print(${J(text)})`,
  printErr: (text) => `import sys\nsys.stderr.write(${J(text + "\n")})`,
  assign: (name, value) => `${name} = ${value}`,
  raise: (message) => `raise ValueError(${J(message)})`,
  errorName: "ValueError",
  spin: (marker) => `print(${J(marker)}, flush=True)\nwhile True:\n    pass`,
  displayHtml: (html) => `display({"text/html": ${J(html)}}, raw=True)`,
  cwdAndEnv: (name) => `import os\nprint(os.getcwd())\nprint(os.environ.get(${J(name)}, "unset"))`,
  childEcho: (text) => `import subprocess\nsubprocess.run(["echo", ${J(text)}])\nNone`,
  completion: (prompt) => `completion(${J(prompt)})`,
  kvSet: (key) => `kv.set(${J(key)}, [1, "ü", {"a": None, "b": True}])`,
  kvPrint: (key) => `import json\nprint(json.dumps(kv.get(${J(key)}), ensure_ascii=False, separators=(",", ":")))`,
  kvIdentity: "id(kv)",
  mixedWrites: (count) =>
    `import os, subprocess, sys\nfor i in range(${count}):\n    k = i % 4\n    if k == 0:\n        print(i)\n` +
    `    elif k == 1:\n        subprocess.run(["echo", str(i)])\n    elif k == 2:\n        sys.stdout.write("%d\\n" % i)\n` +
    `    else:\n        os.write(1, b"%d\\n" % i)`,
  semicolonSuppresses: true
}

const javascript: Dialect = {
  print: (text) => `console.log(${J(text)})`,
  printErr: (text) => `process.stderr.write(${J(text + "\n")})`,
  assign: (name, value) => `var ${name} = ${value}`,
  raise: (message) => `throw new RangeError(${J(message)})`,
  errorName: "RangeError",
  spin: (marker) => `console.log(${J(marker)})\nwhile (true) {}`,
  displayHtml: (html) => `display({"text/html": ${J(html)}}, {raw: true})`,
  cwdAndEnv: (name) => `console.log(process.cwd())\nconsole.log(process.env[${J(name)}] ?? "unset")`,
  childEcho: (text) => `require("node:child_process").execFileSync("echo", [${J(text)}], {stdio: "inherit"})\nundefined`,
  completion: (prompt) => `await completion(${J(prompt)})`,
  kvSet: (key) => `await kv.set(${J(key)}, [1, "ü", {a: null, b: true}])`,
  kvPrint: (key) => `console.log(JSON.stringify(await kv.get(${J(key)})))`,
  kvIdentity: "kv",
  mixedWrites: (count) =>
    `const fs = require("node:fs"), cp = require("node:child_process")\nfor (let i = 0; i < ${count}; i++) {\n` +
    `  const k = i % 4\n  if (k === 0) console.log(i)\n  else if (k === 1) cp.execFileSync("echo", [String(i)], { stdio: "inherit" })\n` +
    `  else if (k === 2) process.stdout.write(\`\${i}\\n\`)\n  else fs.writeSync(1, \`\${i}\\n\`)\n}`,
  semicolonSuppresses: false
}

const ruby: Dialect = {
  print: (text) => `puts ${J(text)}`,
  printErr: (text) => `$stderr.write(${J(text + "\n")})`,
  assign: (name, value) => `${name} = ${value}`,
  raise: (message) => `raise ArgumentError, ${J(message)}`,
  errorName: "ArgumentError",
  spin: (marker) => `puts ${J(marker)}\nloop { }`,
  displayHtml: (html) => `display({"text/html" => ${J(html)}}, raw: true)`,
  cwdAndEnv: (name) => `puts Dir.pwd\nputs ENV.fetch(${J(name)}, "unset")`,
  childEcho: (text) => `system("echo", ${J(text)})\nnil`,
  completion: (prompt) => `completion(${J(prompt)})`,
  kvSet: (key) => `kv.set(${J(key)}, [1, "ü", {"a" => nil, "b" => true}])`,
  kvPrint: (key) => `puts JSON.generate(kv.get(${J(key)}))`,
  kvIdentity: "kv.object_id",
  mixedWrites: (count) =>
    `fd1 = IO.for_fd(1, autoclose: false)\n${count}.times do |i|\n  case i % 4\n  when 0 then puts i\n` +
    `  when 1 then system("echo", i.to_s)\n  when 2 then $stdout.write("#{i}\\n")\n  else fd1.syswrite("#{i}\\n")\n  end\nend\nnil`,
  semicolonSuppresses: true
}

/** Each runner's dialect, by language id. */
export const dialects: Record<string, Dialect> = { py: python, js: javascript, rb: ruby }
