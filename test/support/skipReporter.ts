import type { Reporter, TestCase, TestModule, TestSuite, Vitest } from "vitest/node"

type Child = TestCase | TestSuite

/** Lines naming every skipped suite (once, not its tests) and skipped test, with the reason its title or `ctx.skip` note gives. */
const skippedLines = (file: string, children: Iterable<Child>): Array<string> =>
  [...children].flatMap((child): Array<string> => {
    if (child.type === "suite") {
      return child.state() === "skipped" ? [`${file} > ${child.fullName}`] : skippedLines(file, child.children)
    }
    const result = child.result()
    if (result.state !== "skipped") return []
    return [`${file} > ${child.fullName}${result.note === undefined ? "" : ` [${result.note}]`}`]
  })

/** Lists what the run skipped, after the default reporter's summary, so a missing tool never hides a test (not under `-t`, which skips the rest). */
export default class SkipReporter implements Reporter {
  private readonly lines: Array<string> = []
  private filtered = false

  onInit(vitest: Vitest): void {
    this.filtered = vitest.config.testNamePattern !== undefined
  }

  onTestModuleEnd(module: TestModule): void {
    this.lines.push(...skippedLines(module.relativeModuleId, module.children))
  }

  onTestRunEnd(): void {
    if (this.lines.length === 0 || this.filtered) return
    console.log(`\n Skipped (${this.lines.length}):`)
    for (const line of this.lines.sort()) console.log(`   ↓ ${line}`)
  }
}
