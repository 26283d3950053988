package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// eventTimeout bounds the wait for a watch event after the change.
const eventTimeout = 10 * time.Second

func testWatch(t *testing.T, e *env) {
	t.Run("json events", func(t *testing.T) { testWatchEvents(t, e) })
	t.Run("table", func(t *testing.T) { testWatchTable(t, e) })
}

// watchEvent is one line of --output-watch-events -o json.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// nextEvent is the watch's next event, which must be of type typ for the
// ConfigMap name.
func nextEvent(t *testing.T, w *background, typ, name string) corev1.ConfigMap {
	t.Helper()
	what := typ + " " + name
	var ev watchEvent
	if raw := w.next(t, eventTimeout, what); json.Unmarshal([]byte(raw), &ev) != nil {
		t.Fatalf("waiting for %s: cannot decode %q", what, raw)
	}
	if ev.Type == "ERROR" {
		var st metav1.Status
		json.Unmarshal(ev.Object, &st)
		t.Fatalf("waiting for %s: ERROR event: %s %s (code %d)", what, st.Reason, st.Message, st.Code)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(ev.Object, &cm); err != nil {
		t.Fatalf("waiting for %s: cannot decode the object of %s: %v", what, ev.Type, err)
	}
	if ev.Type != typ || cm.Kind != "ConfigMap" || cm.Name != name || cm.Namespace != ns {
		t.Fatalf("got %s %s %s/%s, want %s", ev.Type, cm.Kind, cm.Namespace, cm.Name, what)
	}
	return cm
}

func testWatchEvents(t *testing.T, e *env) {
	var cur corev1.ConfigMap
	e.k.json(t, &cur, "get", "configmap", cmName, "-n", ns)
	w := e.k.start(t, true, "get", "configmaps", "-n", ns, "--watch", "--output-watch-events", "-o", "json")

	// First the state, then what changes.
	added := nextEvent(t, w, "ADDED", cmName)
	if added.ResourceVersion != cur.ResourceVersion {
		t.Errorf("ADDED at resourceVersion %s, want the current %s", added.ResourceVersion, cur.ResourceVersion)
	}
	var patched corev1.ConfigMap
	e.k.json(t, &patched, "patch", "configmap", cmName, "-n", ns, "--type=merge", "-p", `{"data":{"watched":"json"}}`)
	modified := nextEvent(t, w, "MODIFIED", cmName)
	if modified.ResourceVersion != patched.ResourceVersion || modified.Data["watched"] != "json" {
		t.Errorf("MODIFIED at resourceVersion %s with data %v, want the patch's %s with watched=json", modified.ResourceVersion, modified.Data, patched.ResourceVersion)
	}

	var extra corev1.ConfigMap
	e.k.json(t, &extra, "create", "configmap", "watch-extra", "-n", ns, "--from-literal=k=v")
	if got := nextEvent(t, w, "ADDED", "watch-extra"); got.ResourceVersion != extra.ResourceVersion || got.UID != extra.UID {
		t.Errorf("ADDED watch-extra at %s (uid %s), created at %s (uid %s)", got.ResourceVersion, got.UID, extra.ResourceVersion, extra.UID)
	}
	if out := e.k.ok(t, "delete", "configmap", "watch-extra", "-n", ns); out != "configmap \"watch-extra\" deleted from e2e namespace\n" {
		t.Errorf("delete printed %q", out)
	}
	if got := nextEvent(t, w, "DELETED", "watch-extra"); got.UID != extra.UID {
		t.Errorf("DELETED watch-extra with uid %s, want %s", got.UID, extra.UID)
	}
}

func testWatchTable(t *testing.T, e *env) {
	var cur corev1.ConfigMap
	e.k.json(t, &cur, "get", "configmap", cmName, "-n", ns)
	w := e.k.start(t, false, "get", "configmap", cmName, "-n", ns, "--watch")
	if h := strings.Fields(w.next(t, eventTimeout, "the header")); strings.Join(h, " ") != "NAME DATA AGE" {
		t.Fatalf("watch header %q, want NAME DATA AGE", h)
	}
	row := strings.Fields(w.next(t, eventTimeout, "the first row"))
	if len(row) != 3 || row[0] != cmName || row[1] != strconv.Itoa(len(cur.Data)) {
		t.Fatalf("first row %q, want %s %d <age>", row, cmName, len(cur.Data))
	}
	if r := e.k.run("patch", "configmap", cmName, "-n", ns, "--type=merge", "-p", `{"data":{"watched-table":"yes"}}`); r.err != nil {
		if !e.srv.running() {
			t.Fatalf("kgate dev died while serving the table watch of kubectl get -w (%v):\n%s", e.srv.waitErr, e.srv.log.crash())
		}
		t.Fatalf("%s", r)
	}
	row = strings.Fields(w.next(t, eventTimeout, "the row of the change"))
	if len(row) != 3 || row[0] != cmName || row[1] != strconv.Itoa(len(cur.Data)+1) || !ageRE.MatchString(row[2]) {
		t.Errorf("row after the change %q, want %s %d <age>", row, cmName, len(cur.Data)+1)
	}
}
