package sfc

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestTablesJSON: compiled tables cross to the agent as JSON and come back equal (HopOf's
// keys included); a malformed key is refused.
func TestTablesJSON(t *testing.T) {
	tab, err := Compile(base(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.HopOf) == 0 {
		t.Fatal("the base model compiles to no HopOf entries: the test would prove nothing")
	}
	b, err := json.Marshal(tab)
	if err != nil {
		t.Fatal(err)
	}
	var got Tables
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, tab) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, *tab)
	}
	for _, bad := range []string{`{"HopOf":{"1":2}}`, `{"HopOf":{"a:1":2}}`} {
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s was read", bad)
		}
	}
}
