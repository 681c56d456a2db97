package agent

import "runtime/debug"

// goarm is the ARM version the binary was built for, from its build info
// (GOARM=7 for linux/arm/v7 images).
func goarm() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOARM" && s.Value != "" {
				return s.Value[:1]
			}
		}
	}
	return "7"
}
