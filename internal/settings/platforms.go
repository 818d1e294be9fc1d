package settings

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/office"
)

// LoadPlatforms reads the global "platforms" setting: the platforms whose
// conversations this installation serves, which decides who owns the
// directories of the raw-id layout when hutch migrates them. It is a JSON
// array of platform names; absent is none.
func LoadPlatforms(path string) ([]office.Platform, error) {
	data, exists, err := readFile(path)
	if err != nil || !exists {
		return nil, err
	}
	d, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	raw, ok := d.top["platforms"]
	if !ok {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		return nil, malformed(path, `"platforms" must be an array of platform names`)
	}
	ps, err := ParsePlatforms(strings.Join(names, ","))
	if err != nil {
		return nil, malformed(path, `"platforms": `+err.Error())
	}
	return ps, nil
}

// SetPlatforms stores the "platforms" setting (removed when ps is empty),
// keeping every other key.
func SetPlatforms(path string, ps []office.Platform) error {
	d, err := loadDoc(path)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		delete(d.top, "platforms")
	} else {
		d.top["platforms"] = mustMarshal(ps)
	}
	return saveDoc(path, d, d.sandbox)
}

// ParsePlatforms parses a comma-separated list of platforms (slack,discord),
// sorted and without duplicates. An empty list is none.
func ParsePlatforms(s string) ([]office.Platform, error) {
	var out []office.Platform
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		p, err := office.ParsePlatform(name)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatPlatforms renders ps as ParsePlatforms reads them.
func FormatPlatforms(ps []office.Platform) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = string(p)
	}
	return strings.Join(names, ",")
}
