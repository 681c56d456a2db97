//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// The suite runs in two groups, so that one cluster serves every test and
// most of them run at once:
//
//   - the parallel group: every test that keeps to its own namespace and
//     names and leaves the cluster as it found it. Such a test calls
//     t.Parallel() first.
//   - the serial group: tests that change the cluster for everyone (cut a
//     node's network, kill or restart a Shoal component or containerd,
//     shape every node's link) or that need it quiet (whole-node
//     inventories). Such a test calls serial(t) first and is named in
//     serialTests. They run one at a time, after the parallel group.
//
// hack/e2e.sh runs the suite twice, with SHOAL_E2E_GROUP=parallel and then
// =serial. Without SHOAL_E2E_GROUP every test runs in one go test run (Go
// runs the serial ones first, then the parallel ones), which is what
// `go test -run TestOne` by hand wants.
var serialTests = []string{
	"TestBackboneDeployed",
	"TestCoordinatorFailover",
	"TestMeshMarksCutNodeDeadAndRejoins",
	"TestAgentRestartResumesWork",
	"TestCRRSurvivesCoordinatorLoss",
	"TestCRRSurvivesAgentRestart",
	"TestContainerdRestartKeepsPods",
	"TestImagePullJobSurvivesAgentRestart",
	"TestImageSwarmThroughMirror",
	"TestStorageVersionMigration",
	"TestBroadcastJobNewNode",
	"TestSidecarTerminatorVirtualKubelet",
	"TestPodProbeMarkerWithoutCoordinator",
	"TestPodUnavailableBudgetDrain",
	"TestStatefulSetRecreatesMissingPVC",
	"TestDaemonSetIgnoresNotReadyNodes",
	"TestHelmChartInstall",
	"TestHelmUpgradeKeepsWork",
	"TestWorkloadsAdoptOpenKruisePods",
	"TestSidecarSetAdoptsOpenKruiseInjectedPods",
	"TestCloneSetScalingMinReadyAndScaleStrategy",
	"TestSoak",
}

// serial marks t as a test of the serial group. It fails t if t is not in
// serialTests, where hack/e2e.sh would run it in the parallel group.
func serial(t *testing.T) {
	t.Helper()
	if !slices.Contains(serialTests, t.Name()) {
		t.Fatalf("%s calls serial(t) but is not in serialTests (test/e2e/groups_test.go)", t.Name())
	}
}

// selectGroup narrows the go test run to the group SHOAL_E2E_GROUP names
// ("parallel" or "serial"; empty runs everything) and returns that name.
// The flags must be parsed.
func selectGroup() (string, error) {
	group := os.Getenv("SHOAL_E2E_GROUP")
	if group == "" {
		return "", nil
	}
	pattern := "^(" + strings.Join(serialTests, "|") + ")$"
	var name string
	switch group {
	case "parallel":
		name = "test.skip"
	case "serial":
		name = "test.run"
	default:
		return "", fmt.Errorf("SHOAL_E2E_GROUP=%q: want parallel, serial or nothing", group)
	}
	if v := flag.Lookup(name).Value.String(); v != "" {
		return "", fmt.Errorf("SHOAL_E2E_GROUP=%s sets -%s itself; run without -%s=%q, or without SHOAL_E2E_GROUP",
			group, strings.TrimPrefix(name, "test."), strings.TrimPrefix(name, "test."), v)
	}
	return group, flag.Set(name, pattern)
}
