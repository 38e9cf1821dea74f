package chaos

import (
	"context"
	"fmt"
	"strings"

	"github.com/wamux/wamux/store/postgres"
)

// freshSchema creates a schema of its own for one round on the PostgreSQL
// server at spec and returns the store URL that makes it the gateway's
// search_path, and a drop that removes it with everything in it.
func freshSchema(ctx context.Context, spec string) (string, func() error, error) {
	if !strings.HasPrefix(spec, "postgres://") && !strings.HasPrefix(spec, "postgresql://") {
		return "", nil, fmt.Errorf("chaos: store %q is not a PostgreSQL URL", spec)
	}
	return postgres.FreshSchema(ctx, spec, "wamux_chaos_")
}
