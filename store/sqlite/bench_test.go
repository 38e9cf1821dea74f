package sqlite_test

import (
	"testing"

	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/storetest"
)

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return newStore(b) })
}
