package httpapi

import (
	"net/http"

	"github.com/wamux/wamux"
)

// httpStatus is the single mapping from domain error codes to HTTP
// statuses; a code it does not know is a 500.
func httpStatus(code string) int {
	switch code {
	case wamux.EInvalid:
		return http.StatusBadRequest
	case wamux.EUnauthorized:
		return http.StatusUnauthorized
	case wamux.EForbidden:
		return http.StatusForbidden
	case wamux.ENotFound:
		return http.StatusNotFound
	case wamux.EConflict:
		return http.StatusConflict
	case wamux.ETooLarge:
		return http.StatusRequestEntityTooLarge
	case wamux.EUnavailable:
		return http.StatusServiceUnavailable
	case wamux.ENotAllowed:
		return http.StatusMethodNotAllowed
	case wamux.EUnsupported:
		return http.StatusUnsupportedMediaType
	case wamux.ERateLimited, wamux.EQueueFull:
		return http.StatusTooManyRequests
	case wamux.ENotImplement:
		return http.StatusNotImplemented
	case wamux.EOutsideWindow:
		return http.StatusUnprocessableEntity
	case wamux.EProvider:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}
