package cli

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// applyConfig sets, from the YAML file at path, every flag the command
// line left unset. The file is a map of flag names to values:
//
//	runtime-endpoint: unix:///run/containerd/containerd.sock
//	relist-period: 1s
//	inspect-concurrency: 16
//
// A key that is no flag of the command is an error, so that a typo does
// not pass silently.
func applyConfig(fs *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		flag := fs.Lookup(key)
		if flag == nil || key == "config" {
			return fmt.Errorf("--config %s: %q is not a flag of this command", path, key)
		}
		if flag.Changed {
			continue
		}
		for _, v := range configValues(values[key]) {
			if err := fs.Set(key, v); err != nil {
				return fmt.Errorf("--config %s: %s: %w", path, key, err)
			}
		}
	}
	return nil
}

// configValues turns a YAML value into flag values: one per list item.
func configValues(v any) []string {
	switch v := v.(type) {
	case []any:
		var out []string
		for _, item := range v {
			out = append(out, configValues(item)...)
		}
		return out
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}
	default:
		return []string{fmt.Sprint(v)}
	}
}
