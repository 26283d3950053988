package hijackhttp

import (
	"encoding/json"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/apierror"
)

// WriteStatus writes err, once the connection is hijacked, as the
// metav1.Status the gateway would (apierror.Status of gr and name).
func WriteStatus(w http.ResponseWriter, err error, gr schema.GroupResource, name string) {
	st := apierror.Status(err, gr, name)
	st.Kind, st.APIVersion = "Status", "v1"
	body, mErr := json.Marshal(st)
	if mErr != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(body)
}
