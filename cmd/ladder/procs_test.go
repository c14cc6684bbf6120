package main

import "testing"

func TestProcsFor(t *testing.T) {
	tests := []struct {
		name    string
		current int
		env     string
		want    int
	}{
		{"one CPU: raised", 1, "", 2},
		{"two CPUs: as is", 2, "", 2},
		{"many CPUs: as is", 16, "", 16},
		{"the operator's GOMAXPROCS=1 stands", 1, "1", 1},
		{"the operator's GOMAXPROCS=4 stands", 4, "4", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := procsFor(tt.current, tt.env); got != tt.want {
				t.Errorf("procsFor(%d, %q) = %d, want %d", tt.current, tt.env, got, tt.want)
			}
		})
	}
}
