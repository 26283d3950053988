package watchcheck

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// EventOf is what the checks compare of a ConfigMap watch event: a
// ConfigMap's fields, a Status's code and message, or an ERROR naming an
// unexpected object.
func EventOf(ev watch.Event) Event {
	e := Event{Type: string(ev.Type)}
	switch o := ev.Object.(type) {
	case *corev1.ConfigMap:
		e = ConfigMapEvent(e.Type, o)
	case *metav1.Status:
		e.Code, e.Message = o.Code, o.Message
	default:
		e.Type, e.Message = "ERROR", fmt.Sprintf("unexpected object %T in a %s event", ev.Object, ev.Type)
	}
	return e
}

// ConfigMapEvent is an event of type typ carrying cm.
func ConfigMapEvent(typ string, cm *corev1.ConfigMap) Event {
	e := Event{Type: typ, Namespace: cm.Namespace, Name: cm.Name, Data: cm.Data["v"]}
	if len(cm.Labels) > 0 {
		e.Labels = cm.Labels
	}
	e.RV, _ = strconv.ParseInt(cm.ResourceVersion, 10, 64)
	e.InitialEnd = cm.Annotations[metav1.InitialEventsAnnotationKey] == "true"
	return e
}
