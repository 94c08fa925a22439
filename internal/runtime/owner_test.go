package runtime

import "testing"

// The process identity's forms, built in one place.
func TestOwnerForms(t *testing.T) {
	o := Owner{NodeID: "eu:west", ServiceID: 7, Instance: "ab12"}
	if got := o.Node(); got != "eu:west:7" {
		t.Errorf("Node() = %q", got)
	}
	if got := o.Process(); got != "eu:west:7:ab12" {
		t.Errorf("Process() = %q", got)
	}
}
