package guard

import (
	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/kgate/kgate/gateway/internal/rest"
)

type auditIDKey struct{}

// HeaderAuditID is the request and response header carrying a request's
// audit ID, as kube-apiserver's.
const HeaderAuditID = rest.HeaderAuditID

// maxAuditIDLen bounds an audit ID a client sends; a longer one (or one
// with characters outside printable ASCII) is replaced by a new UUID.
const maxAuditIDLen = 128

// AuditID is the request's audit ID: the client's Audit-ID header when it
// sent a sane one, else a new UUID. It is chosen once per request.
func AuditID(rc *fasthttp.RequestCtx) string {
	if id, ok := rc.UserValue(auditIDKey{}).(string); ok {
		return id
	}
	id := string(rc.Request.Header.Peek(HeaderAuditID))
	if !validAuditID(id) {
		id = uuid.NewString()
	}
	rc.SetUserValue(auditIDKey{}, id)
	return id
}

func validAuditID(id string) bool {
	if id == "" || len(id) > maxAuditIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}
