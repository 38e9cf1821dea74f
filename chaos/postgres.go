package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/wamux/wamux/store/postgres"
)

// freshSchema creates a schema of its own for one round on the PostgreSQL
// server at spec and returns the store URL that makes it the gateway's
// search_path, and a drop that removes it with everything in it.
func freshSchema(ctx context.Context, spec string) (string, func(), error) {
	if !strings.HasPrefix(spec, "postgres://") && !strings.HasPrefix(spec, "postgresql://") {
		return "", nil, fmt.Errorf("chaos: store %q is not a PostgreSQL URL", spec)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "wamux_chaos_" + hex.EncodeToString(b)
	st, err := postgres.Open(ctx, spec, postgres.Options{Schema: schema})
	if err != nil {
		return "", nil, err
	}
	sep := "?"
	if strings.Contains(spec, "?") {
		sep = "&"
	}
	return spec + sep + "search_path=" + schema, func() {
		_, _ = st.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		st.Close()
	}, nil
}
