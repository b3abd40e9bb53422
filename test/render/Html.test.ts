import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import { htmlToMarkdown } from "../../src/render/Html.ts"
import { asciiText, binaryText, constantFrom, oneOf, sized, weighted } from "../kernel/arbitraries.ts"

describe("character references", () => {
  it("decodes named, decimal and hex references, including names outside the common few", () => {
    expect(htmlToMarkdown("<p>a &amp; b &quot;d&quot; &#39;e&#x27; &copy; &hellip; &NotNestedGreaterGreater; &Zopf;</p>"))
      .toBe("a & b \"d\" 'e' © … ⪢̸ ℤ")
    expect(htmlToMarkdown("<p>&#x1F600;&#128512;</p>")).toBe("😀😀")
  })

  it("maps windows-1252 code points and invalid ones like a browser", () => {
    expect(htmlToMarkdown("<p>&#150;&#8212;&#0;&#xD800;&#99999999;</p>")).toBe("–—\ufffd\ufffd\ufffd")
  })

  it("leaves unknown names and bare ampersands alone, and reads legacy names without a semicolon as a browser does", () => {
    expect(htmlToMarkdown("<p>AT&T &bogus; &constructor; fish & chips</p>")).toBe("AT&T &bogus; &constructor; fish & chips")
    expect(htmlToMarkdown("<p>&amp &copy &notit;</p>")).toBe("& © ¬it;")
  })

  it("decodes references in attributes as an attribute, not as text", () => {
    expect(htmlToMarkdown(`<a href="https://x.org/?a=1&copy=2&amp;b=3">q</a>`)).toBe("[q](https://x.org/?a=1&copy=2&b=3)")
  })
})

describe("htmlToMarkdown", () => {
  it("converts a pandas-style table and drops its style block", () => {
    const html = `<div><style scoped>.dataframe tbody tr th { vertical-align: top; }</style>
<table border="1" class="dataframe"><thead><tr style="text-align: right;"><th></th><th>name</th><th>score</th></tr></thead>
<tbody><tr><th>0</th><td>ada</td><td>1.5</td></tr><tr><th>1</th><td>x|y</td><td>22</td></tr></tbody></table></div>`
    expect(htmlToMarkdown(html)).toBe(
      [
        "|     | name | score |",
        "| --- | ---- | ----- |",
        "| 0   | ada  | 1.5   |",
        "| 1   | x\\|y | 22    |"
      ].join("\n")
    )
  })

  it("reads a table with implied row and cell ends, spans and a caption", () => {
    const html = "<table><caption>Totals</caption><tr><td>a<td colspan=2>b<tr><td>1<td>2<td>3</table>"
    expect(htmlToMarkdown(html)).toBe(["Totals", "", "| a   | b   |     |", "| --- | --- | --- |", "| 1   | 2   | 3   |"].join("\n"))
  })

  it("aligns wide characters by columns", () => {
    expect(htmlToMarkdown("<table><tr><th>日本</th><th>x</th></tr><tr><td>a</td><td>b</td></tr></table>")).toBe(
      ["| 日本 | x   |", "| ---- | --- |", "| a    | b   |"].join("\n")
    )
  })

  it("converts headings, emphasis, links, line breaks and paragraphs", () => {
    const html = `<h1>Report</h1><h3>Part <em>two</em></h3>
<p>Some <b>bold </b>and <i>italic</i>, <s>old</s>, <code>x = 1</code>
and a <a href="https://example.com/a b(c)">link</a>.<br>Next line</p><p>See <a href="https://x.org">https://x.org</a></p>`
    expect(htmlToMarkdown(html)).toBe(
      [
        "# Report",
        "",
        "### Part *two*",
        "",
        "Some **bold** and *italic*, ~~old~~, `x = 1` and a [link](https://example.com/a%20b%28c%29).",
        "Next line",
        "",
        "See <https://x.org>"
      ].join("\n")
    )
  })

  it("drops script-like links and keeps only link text", () => {
    expect(htmlToMarkdown(`<a href="javascript:alert(1)">click</a> <a href="#top">top</a> <a>bare</a>`)).toBe("click top bare")
  })

  it("converts nested lists, with implied item ends and a start number", () => {
    const html = "<ul><li>one<li>two<ul><li>two.a<li>two.b</ul><li>three</ul><ol start=\"4\"><li>four</li><li><p>five</p></li></ol>"
    expect(htmlToMarkdown(html)).toBe(["- one", "- two", "  - two.a", "  - two.b", "- three", "", "4. four", "5. five"].join("\n"))
  })

  it("keeps preformatted text exactly, in a fence longer than any backtick run inside", () => {
    const html = "<pre><code class=\"language-python\">def f():\n    return \"```\" &lt; 1\n</code></pre>"
    expect(htmlToMarkdown(html)).toBe(["````python", "def f():", "    return \"```\" < 1", "````"].join("\n"))
  })

  it("converts block quotes, rules, images and definition lists", () => {
    const html = "<blockquote><p>quoted</p><p>twice</p></blockquote><hr><img src=\"plot.png\" alt=\"a plot\"><img src=\"data:image/png;base64,AAAA\" alt=\"inline\"><dl><dt>term</dt><dd>meaning</dd></dl>"
    expect(htmlToMarkdown(html)).toBe(
      ["> quoted", ">", "> twice", "", "---", "", "![a plot](plot.png)[image/png: inline]", "", "term", "", ": meaning"].join("\n")
    )
  })

  it("collapses whitespace outside pre, keeps non-breaking spaces, and decodes entities", () => {
    expect(htmlToMarkdown("<p>  a \n\t b&nbsp;&nbsp;c &amp; d  </p>")).toBe("a b  c & d")
  })

  it("escapes text that would read as a tag", () => {
    expect(htmlToMarkdown("<p>&lt;script&gt;alert(1)&lt;/script&gt; and 1 &lt; 2</p>")).toBe("\\<script>alert(1)\\</script> and 1 < 2")
  })

  it("drops scripts, styles, comments, titles and templates with their content", () => {
    const html = "<head><title>T</title><style>p{}</style></head><body><!-- hidden --><script type=\"module\">let x = '</div>'</script>" +
      "<p>kept</p><template><p>no</p></template><noscript>nojs</noscript><script>unterminated"
    expect(htmlToMarkdown(html)).toBe("kept")
  })

  it("lays out inline elements that hold blocks as blocks", () => {
    expect(htmlToMarkdown("<span>a<div>b</div>c</span>")).toBe("a\n\nb\n\nc")
  })

  it("reads odd attribute names the way a browser does", () => {
    expect(htmlToMarkdown("<b =x>y</b>")).toBe("**y**")
    expect(htmlToMarkdown("<A=")).toBe("")
    expect(htmlToMarkdown("<p\u000bid=1>text</p>")).toBe("text")
  })

  it("survives very deep nesting", () => {
    expect(htmlToMarkdown("<div>".repeat(50_000) + "deep" + "</div>".repeat(50_000))).toBe("deep")
    expect(htmlToMarkdown("<b>".repeat(50_000) + "x")).toContain("x")
  })

  it.prop("never throws on arbitrary text", [binaryText(400)], ([text]) => {
    expect(typeof htmlToMarkdown(text)).toBe("string")
  }, sized(400))

  const brokenFragment = oneOf(
    constantFrom(
      "<p>", "</p>", "<div>", "</div>", "<table>", "<tr>", "<td>", "</td>", "<th>", "</table>", "<ul>", "<li>", "</ul>",
      "<ol>", "<pre>", "</pre>", "<b>", "</b>", "<a href='x'>", "</a>", "<br>", "<br/>", "<h2>", "</h2>", "<code>",
      "<!--", "-->", "<", ">", "\"", "'", "/", "=", " ", "\n", "<img src=x alt=", "<style>", "</style>", "<svg>", "<span", "</",
      "<![CDATA[", "]]>", "<!doctype html>", "&amp", "&#x", ";"
    ),
    asciiText(8)
  )

  it.prop("never throws on broken tag soup", [Arbitrary.array(brokenFragment, { maxLength: 60 })], ([parts]) => {
    expect(typeof htmlToMarkdown(parts.join(""))).toBe("string")
  }, sized(60))

  /** Complete tags and text without `<` or `&`: every script element in it is read as one. */
  const completeFragment = oneOf(
    constantFrom(
      "<p>", "</p>", "<div class=\"a\">", "</div>", "<table>", "<tr>", "<td>", "</td>", "<th>", "</table>", "<ul>", "<li>",
      "</ul>", "<ol start=2>", "<pre>", "</pre>", "<b>", "</b>", "<i>", "<a href='x'>", "</a>", "<br>", "<br/>", "<hr>",
      "<h2>", "</h2>", "<code>", "</code>", "<!-- note -->", "<img src=x alt=y>", "<style>b{}</style>", "<blockquote>",
      "<span title='>'>", "</span>", "</nonsense>"
    ),
    Arbitrary.map(asciiText(8), (text) => text.replace(/[<&]/g, ""))
  )
  const scriptElement = Arbitrary.all([
    constantFrom("<script>", "<SCRIPT type=\"text/javascript\">", "<script src='a.js'>", "<script/>", "<Script\n>"),
    Arbitrary.array(oneOf(brokenFragment, constantFrom("</scrip", "<script>", "</scripts>", "-->", "\"")), { maxLength: 6 }),
    constantFrom("</script>", "</SCRIPT >", "</script\n>", "</script/>", "")
  ]).pipe(
    Arbitrary.map(([open, body, close]) => ({ open, body: body.join(""), close })),
    Arbitrary.filter(({ body }) => !/<\/script[\s/>]/i.test(body + " ")),
    Arbitrary.map(({ body, close, open }) => `${open}SECRET${body}SECRET${close}`)
  )
  const soup = Arbitrary.map(
    Arbitrary.array(weighted({ weight: 4, arbitrary: completeFragment }, { weight: 1, arbitrary: scriptElement }), { maxLength: 40 }),
    (parts) => parts.join("")
  )

  it.prop("never lets script content or an unescaped <script through", [soup], ([html]) => {
    const markdown = htmlToMarkdown(html)
    expect(markdown).not.toContain("SECRET")
    expect(markdown).not.toMatch(/(^|[^\\])<script/i)
  }, sized(40))
})
