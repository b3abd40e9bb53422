/**
 * The differential corpus: cells run in order through our runner and through ipykernel on
 * the same interpreter, each compared on status, error class and message, stdout, stderr,
 * and per output (result or display): MIME types, text/plain, text/html byte for byte and
 * the image count. A cell may list accepted differences: the fields where we differ from
 * ipykernel on purpose, each with the reason. The test fails when an accepted difference
 * disappears, so the list stays true.
 */

/** A field compared per cell. */
export type Field = "status" | "error" | "stdout" | "stderr" | "outputs"

/** One corpus cell. */
export interface CorpusCell {
  readonly code: string
  /** Fields where we differ from ipykernel on purpose, with the reason. */
  readonly accept?: Partial<Record<Field, string>>
  /**
   * ipykernel's own fd 2 capture races: under load a raw `os.write(2, …)` shows up in the
   * next cell's stderr (the bug our runner fixes by draining its pumps before `done`). On
   * ipykernel's side only, this cell's stderr and the next one's are joined; the next cell
   * must write nothing to stderr itself. Our side is compared strictly, cell by cell.
   */
  readonly ipykernelFdRace?: true
}

/** Cells in the order they run; later cells use names earlier ones define. */
export const CORPUS: ReadonlyArray<CorpusCell> = [
  // values and IPython's pretty printer
  { code: "x = [1, 2, 3]" },
  { code: "x" },
  { code: "type(x[0])" },
  { code: "[type(v) for v in (1, 'a', 2.0, None)]" },
  { code: "list(range(40))" },
  { code: "{i: 'v' * i for i in range(12)}" },
  { code: "{'k': list(range(30)), 'nested': {'n': 'x' * 70}}" },
  { code: "{3, 1, 2}, frozenset(), set()" },
  { code: "def f(a, b=2, *args, **kw):\n    return a\nf" },
  { code: "len, print" },
  { code: "class Plain:\n    pass\nPlain, Plain()" },
  { code: "ValueError('bad', 2)" },
  { code: "import re\nre.compile(r'\\d+'), re.compile('a', re.I)" },
  { code: "from collections import Counter, OrderedDict, deque, defaultdict\nCounter('abracadabra')" },
  { code: "OrderedDict(a=1), deque([1, 2], maxlen=5), defaultdict(list)" },
  { code: "import types\ntypes.SimpleNamespace(a=1, b='two')" },
  { code: "'a' * 100" },
  { code: "b'bytes' * 20" },
  { code: "print('printed'); 42" },
  { code: "x = 5;" },
  { code: "x;" },
  // displays and reprs
  { code: "class H:\n    def _repr_html_(self):\n        return '<b>bold</b>'\nH()" },
  { code: "from IPython.display import HTML, Markdown\nHTML('<i>x</i>')" },
  { code: "Markdown('# Title')" },
  { code: "display([1, 2]); display(H())" },
  { code: "from PIL import Image\nImage.new('RGB', (4, 4), 'red')" },
  // streams
  { code: "import sys\nprint('out')\nprint('err', file=sys.stderr)" },
  { code: "import os\nos.write(2, b'raw fd2\\n'); None", ipykernelFdRace: true },
  { code: "print('next')" },
  // errors
  { code: "1 / 0" },
  { code: "undefined_name" },
  { code: "raise ValueError('bad value')" },
  { code: "def g():\n    raise KeyError('k')\ng()" },
  // numpy and pandas
  { code: "import numpy as np\nnp.arange(12).reshape(3, 4)" },
  { code: "np.float64(1.5), np.array([1.5, 2.25]), np.int64(7)" },
  { code: "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z'], 'c': [0.5, 1.5, 2.5]})\ndf" },
  { code: "df.describe()" },
  { code: "df['a']" },
  { code: "df.groupby('b').sum()" },
  { code: "pd.Series(range(100))" },
  // figures
  {
    code: "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3])\nfig",
    accept: {
      outputs: "ipykernel shows a returned open figure twice (as the result, then again when the inline backend " +
        "flushes open figures); we show it once, as the result: the same picture twice is noise for a reader and " +
        "costs an agent twice the image tokens"
    }
  },
  { code: "plt.plot([1, 2]);" },
  { code: "plt.figure();" },
  { code: "fig2, ax2 = plt.subplots()\nax2.plot([3, 1])\nplt.close(fig2)\nfig2" },
  { code: "fig3, axes = plt.subplots(1, 2)\naxes[0].plot([1]); axes[1].bar([1, 2], [3, 4])\nplt.show()" },
  // timing magics
  { code: "%time sum(range(100))" },
  { code: "%%time\ny = 2\ny * 3" },
  { code: "%timeit -n 3 -r 2 sum(range(10))" },
  { code: "%%timeit -n 2 -r 3\ntotal = sum(range(10))" },
  { code: "timing = %timeit -n 1 -r 1 -q -o pass\ntiming.loops, timing.repeat, len(timing.all_runs)" },
  // other magics
  { code: "%%file fidelity.txt\nhello" },
  { code: "%%writefile -a fidelity.txt\nmore" },
  { code: "%%writefile fidelity.txt\nfresh" },
  { code: "print(open('fidelity.txt').read())" },
  { code: "%xmode Minimal" },
  { code: "1 / 0" },
  { code: "%xmode Context" },
  { code: "%load_ext no_such_extension_for_fidelity" },
  { code: "%precision 2" },
  { code: "3.14159, [1.23456]" },
  { code: "%precision" },
  { code: "3.14159" },
  { code: "%pwd" },
  { code: "os.makedirs('sub', exist_ok=True)\n%cd sub" },
  { code: "%cd .." },
  { code: "%pushd sub" },
  { code: "%dirs" },
  { code: "%popd" },
  { code: "%env FIDELITY_VAR=1" },
  { code: "%env FIDELITY_VAR" },
  { code: "%%html\n<b>hi</b>" },
  { code: "%%markdown\n# Heading" },
  { code: "%%bash\necho from bash\necho to stderr >&2" },
  { code: "%%script python3\nprint(6 * 7)" },
  { code: "%%capture captured\nprint('hidden')\n7" },
  { code: "captured.stdout, [o.data['text/plain'] for o in captured.outputs]" },
  { code: "listing = !echo one; echo two\nlisting" },
  { code: "%sx echo sx" },
  {
    code: "stats = %prun -q -r sum(range(10))\ntype(stats)",
    accept: { stdout: "IPython prints a stray space after %prun (its empty SystemExit note, print(..., end=' ')); we print nothing" }
  },
  { code: "%xdel stats\n'stats' in dir()" },
  { code: "%%!\necho cell-shell" },
  { code: "%%latex\n$x^2$" },
  { code: "%%svg\n<svg xmlns='http://www.w3.org/2000/svg' width='4' height='4'></svg>" },
  { code: "%%javascript\nconsole.log(1)" },
  { code: "%history -n 1-3" },
  { code: "%alias_magic tt timeit" },
  { code: "%tt -n 1 -r 1 pass" },
  { code: "%reset_selective -f ^listing$\n'listing' in dir(), 'x' in dir()" },
  {
    code: "%time 1 / 0",
    accept: {
      status: "IPython's %time shows the traceback but swallows the exception, so the cell goes on and reports " +
        "ok; we let it end the cell as an error, so a failed statement never reads as a success"
    }
  },
  {
    code: "%%time x = 1\ny = 1",
    accept: {
      error: "ipykernel prints a UsageError as a stderr line and sends no error; we send it as the cell's error " +
        "(ename UsageError, same message), so a host reads a class and a message like any other failure",
      stderr: "as for error: the message is in the error, not on stderr"
    }
  },
  {
    code: "%store x",
    accept: {
      status: "%store needs IPython's profile database, kept across kernels; we raise a UsageError that says so",
      error: "as for status: our UsageError against ipykernel's success",
      stdout: "ipykernel prints \"Stored 'x' (int)\"; we print nothing"
    }
  },
  {
    code: "%autosave 60",
    accept: {
      status: "there is no notebook to save; ours is a UsageError that says so",
      error: "as for status",
      stdout: "ipykernel prints the autosave interval it sent to the notebook",
      outputs: "ipykernel sends the notebook a JavaScript display that sets the interval"
    }
  },
  { code: "'semicolon';" }
]
