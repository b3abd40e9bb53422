/**
 * A Python cell that looks for a credential everywhere a kernel could read it: its own
 * environment (by value, and by a name fragment) and the environ and cmdline of every
 * process its /proc shows, its parent's included. It prints the places found, then the
 * variables found: `[] []` when there are none.
 */
export const credentialScanCell = (secret: string, nameFragment: string): string =>
  [
    "import os",
    "found = []",
    "for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self', str(os.getppid())]:",
    "    for name in ('environ', 'cmdline'):",
    "        try:",
    "            with open(f'/proc/{pid}/{name}', 'rb') as f:",
    `                if ${JSON.stringify(secret)}.encode() in f.read(): found.append(f'{pid}/{name}')`,
    "        except OSError:",
    "            pass",
    `print(found, [k for k, v in os.environ.items() if ${JSON.stringify(secret)} in v or ${JSON.stringify(nameFragment)} in k])`
  ].join("\n")

/** A Python cell that prints whether the environ of process `pid` is readable. */
export const environReachableCell = (pid: number): string =>
  `try:\n    open('/proc/${pid}/environ', 'rb').read(); print('readable')\nexcept OSError:\n    print('unreachable')`
