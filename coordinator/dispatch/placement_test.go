package dispatch

import (
	"testing"

	"github.com/stretchr/testify/require"

	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

func TestPlacementFollowsTheNode(t *testing.T) {
	s := NewStore()
	p := NewPlacement(s)
	item := func() *nodeworkv1.WorkItem {
		return &nodeworkv1.WorkItem{Id: "noop/ns/a", Kind: "noop", Spec: &nodeworkv1.WorkItem_Noop{Noop: &nodeworkv1.NoopSpec{Steps: 1}}}
	}
	p.Place("noop/ns/a", "n1", item())
	it, _ := s.Item("n1", "noop/ns/a")
	require.NotNil(t, it)
	require.Equal(t, "n1", p.Node("noop/ns/a"))

	p.Place("noop/ns/a", "n2", item())
	it, _ = s.Item("n1", "noop/ns/a")
	require.Nil(t, it, "moved off the old node")
	it, _ = s.Item("n2", "noop/ns/a")
	require.NotNil(t, it)

	p.Place("noop/ns/a", "n2", nil)
	it, _ = s.Item("n2", "noop/ns/a")
	require.Nil(t, it, "removed")
	require.Empty(t, p.Node("noop/ns/a"))
}
