package httpapi

import (
	"testing"

	"github.com/wamux/wamux"
)

func TestHTTPStatusOfErrorCodes(t *testing.T) {
	cases := map[string]int{
		wamux.EInvalid: 400, wamux.EUnauthorized: 401, wamux.EForbidden: 403, wamux.ENotFound: 404,
		wamux.ENotAllowed: 405, wamux.EConflict: 409, wamux.ETooLarge: 413, wamux.EUnsupported: 415,
		wamux.ERateLimited: 429, wamux.EInternal: 500, wamux.ENotImplement: 501, wamux.EUnavailable: 503,
		wamux.EOutsideWindow: 422, wamux.EProvider: 502,
		"something-else": 500,
	}
	for code, want := range cases {
		if got := httpStatus(code); got != want {
			t.Errorf("httpStatus(%s) = %d, want %d", code, got, want)
		}
	}
}
