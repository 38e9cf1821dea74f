package receipts_test

import (
	"testing"

	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/receipts/filtertest"
)

func TestBloomFilterConformance(t *testing.T) {
	filtertest.Run(t, func(t *testing.T, cfg receipts.BloomConfig) receipts.Filter {
		b, err := receipts.NewBloom(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, filtertest.Options{})
}
