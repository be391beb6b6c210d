// Command gen writes the configuration reference and schema generated from
// package config's structs: docs/CONFIG.md and docs/config.schema.json.
// Run it from the module's root after changing a field:
//
//	go run ./config/gen
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spillwayhq/spillway/config"
)

func main() {
	dir := flag.String("docs", "docs", "the directory to write CONFIG.md and config.schema.json into")
	flag.Parse()
	for name, data := range map[string][]byte{
		"CONFIG.md":          []byte(config.Reference()),
		"config.schema.json": config.Schema(),
	} {
		path := filepath.Join(*dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
