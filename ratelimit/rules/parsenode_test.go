package rules

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"
)

// ParseNode reads rules embedded in another file, with the same checks as
// Parse and problems at their place in that file.
func TestParseNode(t *testing.T) {
	const outer = "gateway:\n  limits:\n    rules:\n      - {id: a, rate: 1, per: 1s}\n      - {id: b, rate: 2, per: 1m, colour: red}\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(outer), &doc); err != nil {
		t.Fatal(err)
	}
	limits := doc.Content[0].Content[1].Content[1] // gateway: → limits:
	_, err := ParseNode("gw.yaml", limits)
	want := `gw.yaml:5:35: rule "b": unknown field "colour" (want id, key, rate, per, burst, algorithm, cost, shadow, failMode, onMissing, match)`
	if err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v, want %s", err, want)
	}
	limits.Content[1].Content = limits.Content[1].Content[:1] // rule a only
	set, err := ParseNode("gw.yaml", limits)
	if err != nil || len(set.Rules) != 1 || set.Rules[0].ID != "a" || set.Rules[0].Spec.Per != 1 {
		t.Fatalf("set %+v, error %v", set, err)
	}
}
