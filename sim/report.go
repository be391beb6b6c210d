package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is what a scenario produced: the text the reference prints, the
// same results as tables for --format json, and an optional chart for --svg.
type Report struct {
	Text   strings.Builder
	Tables []*Table
	Charts []*Chart
}

// Printf appends formatted text to the report.
func (r *Report) Printf(format string, args ...any) { fmt.Fprintf(&r.Text, format, args...) }

// Println appends s and a newline, like console.log(s).
func (r *Report) Println(s string) {
	r.Text.WriteString(s)
	r.Text.WriteByte('\n')
}

// Table adds a table with the given column keys and returns it.
func (r *Report) Table(name string, columns ...string) *Table {
	t := &Table{Name: name, Columns: columns}
	r.Tables = append(r.Tables, t)
	return t
}

// Table is a list of rows with named columns; in JSON each row is an object
// whose keys are the column names, in order.
type Table struct {
	Name    string
	Columns []string
	Rows    [][]any
}

// Add appends a row; it must have one value per column. Values are numbers,
// strings, booleans or nil; NaN and infinities become null.
func (t *Table) Add(values ...any) {
	if len(values) != len(t.Columns) {
		panic(fmt.Sprintf("sim: table %q: row has %d values for %d columns", t.Name, len(values), len(t.Columns)))
	}
	t.Rows = append(t.Rows, values)
}

// WriteJSON writes the scenario's results as one JSON object:
//
//	{"scenario": NAME, "tables": [{"name": ..., "rows": [{COLUMN: VALUE, ...}, ...]}]}
func (r *Report) WriteJSON(w io.Writer, scenario string) error {
	var b bytes.Buffer
	b.WriteString(`{"scenario":`)
	writeJSONValue(&b, scenario)
	b.WriteString(`,"tables":[`)
	for i, t := range r.Tables {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  {\"name\":")
		writeJSONValue(&b, t.Name)
		b.WriteString(`,"rows":[`)
		for j, row := range t.Rows {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n    {")
			for k, col := range t.Columns {
				if k > 0 {
					b.WriteByte(',')
				}
				writeJSONValue(&b, col)
				b.WriteByte(':')
				writeJSONValue(&b, row[k])
			}
			b.WriteByte('}')
		}
		b.WriteString("]}")
	}
	b.WriteString("]}\n")
	_, err := w.Write(b.Bytes())
	return err
}

func writeJSONValue(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			b.WriteString("null")
			return
		}
		b.WriteString(Num(x))
	case nil:
		b.WriteString("null")
	default:
		enc, err := json.Marshal(x)
		if err != nil {
			enc, _ = json.Marshal(fmt.Sprint(x))
		}
		b.Write(enc)
	}
}
