package netguard

import (
	"slices"
	"strings"
	"testing"
)

func TestParseNetworks(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{"127.0.0.0/8,::1/128", []string{"127.0.0.0/8", "::1/128"}},
		{" 10.0.0.0/8 , fd00::/8 ,", []string{"10.0.0.0/8", "fd00::/8"}},
		{"192.168.1.7", []string{"192.168.1.7/32"}},
		{"::1", []string{"::1/128"}},
		{"10.1.2.3/8", []string{"10.0.0.0/8"}},
		{"::ffff:127.0.0.0/104", []string{"127.0.0.0/8"}},
		{"::ffff:10.0.0.1", []string{"10.0.0.1/32"}},
		{"0.0.0.0/0", []string{"0.0.0.0/0"}},
	}
	for _, tt := range tests {
		got, err := ParseNetworks(tt.in)
		if err != nil {
			t.Errorf("ParseNetworks(%q): %v", tt.in, err)
			continue
		}
		var gotS []string
		for _, p := range got {
			gotS = append(gotS, p.String())
		}
		if !slices.Equal(gotS, tt.want) {
			t.Errorf("ParseNetworks(%q) = %v, want %v", tt.in, gotS, tt.want)
		}
	}
}

func TestParseNetworksNamesTheBadEntry(t *testing.T) {
	for _, bad := range []string{"localhost", "10.0.0.0/33", "10.0.0/8", "fe80::1%eth0", "1.2.3.4/", "/8", "::1/129", "1.2.3.4.5"} {
		_, err := ParseNetworks("127.0.0.0/8, " + bad + ", ::1")
		if err == nil {
			t.Errorf("ParseNetworks accepted %q", bad)
			continue
		}
		if !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("error %q does not name entry %q", err, bad)
		}
	}
}

func FuzzParseNetworks(f *testing.F) {
	for _, s := range []string{"", "127.0.0.0/8,::1/128", "10.0.0.1", " ,, ", "::ffff:1.2.3.4/120", "fe80::1%eth0/64", "1.2.3.4/-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseNetworks(s)
		if err != nil {
			return
		}
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("ParseNetworks(%q) yields %v, not a valid masked prefix", s, p)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				t.Fatalf("ParseNetworks(%q) yields mapped prefix %v, which no unmapped address matches", s, p)
			}
			again, err := ParseNetworks(p.String())
			if err != nil || len(again) != 1 || again[0] != p {
				t.Fatalf("ParseNetworks(%q) = %v, %v; want [%v]", p, again, err, p)
			}
		}
	})
}
