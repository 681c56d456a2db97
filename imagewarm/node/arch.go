package node

import "runtime"

// defaultArch is the architecture images are resolved for by default.
func defaultArch() string { return runtime.GOARCH }
