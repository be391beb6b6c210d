package chart

import (
	"html"
	"io"
	"strings"
)

// WriteHTML writes a self-contained HTML page (no scripts, no external
// style sheets, fonts or images): the title as its heading, the SVG image
// inline, then each table as preformatted text, in order. svg should be
// WriteSVG's output; nil or empty leaves the image out. The title and the
// tables are escaped; the SVG is inserted as it is.
func WriteHTML(w io.Writer, title string, svg []byte, tables ...string) error {
	var b strings.Builder
	t := html.EscapeString(title)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<title>" + t + "</title>\n")
	b.WriteString("<style>body{font-family:sans-serif;margin:2em;max-width:1100px}" +
		"pre{font-size:13px;background:#f6f6f6;padding:1em;overflow-x:auto}svg{max-width:100%;height:auto}</style>\n")
	b.WriteString("</head>\n<body>\n<h1>" + t + "</h1>\n")
	if len(svg) > 0 {
		b.WriteString("<figure>\n")
		b.Write(svg)
		b.WriteString("</figure>\n")
	}
	for _, tab := range tables {
		b.WriteString("<pre>" + html.EscapeString(strings.TrimRight(tab, "\n")) + "</pre>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
