package rest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage/registry"
)

// listOptions are the query parameters of list and watch, validated as
// kube-apiserver validates them.
type listOptions struct {
	labelSelector string
	fieldSelector string
	labels        labels.Selector
	fields        fields.Selector

	resourceVersion      string // as given
	rv                   int64  // parsed; 0 when unset or "0"
	resourceVersionMatch metav1.ResourceVersionMatch

	limit    int64
	cont     *continueToken
	contRaw  string
	watch    bool
	timeout  int64 // timeoutSeconds, 0 when unset
	bookmark bool  // allowWatchBookmarks
	// sendInitialEvents: nil unset.
	sendInitialEvents *bool
}

func parseListOptions(args *fasthttp.Args, res *registry.Resource, watch bool) (*listOptions, error) {
	o := &listOptions{watch: watch}
	o.labelSelector = string(args.Peek("labelSelector"))
	o.fieldSelector = string(args.Peek("fieldSelector"))
	var err error
	if o.labels, err = labels.Parse(o.labelSelector); err != nil {
		return nil, apierror.BadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	if o.fields, err = fields.ParseSelector(o.fieldSelector); err != nil {
		return nil, apierror.BadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	for _, req := range o.fields.Requirements() {
		if _, ok := res.ConvertFieldLabel(req.Field); !ok {
			return nil, apierror.BadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals && req.Operator != selection.NotEquals {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid field selector operator %q", req.Operator))
		}
	}
	if res.FieldLabels != nil && !o.fields.Empty() {
		// From here on, and at the cache nodes, the selector names the
		// stored object's fields.
		if o.fields, err = o.fields.Transform(func(label, value string) (string, string, error) {
			f, _ := res.ConvertFieldLabel(label)
			return f, value, nil
		}); err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		o.fieldSelector = o.fields.String()
	}
	o.resourceVersion = string(args.Peek("resourceVersion"))
	if o.resourceVersion != "" {
		if o.rv, err = strconv.ParseInt(o.resourceVersion, 10, 64); err != nil || o.rv < 0 {
			return nil, invalidRV(o.resourceVersion)
		}
	}
	o.resourceVersionMatch = metav1.ResourceVersionMatch(args.Peek("resourceVersionMatch"))
	if v := args.Peek("limit"); len(v) > 0 {
		if o.limit, err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid limit %q", v))
		}
		if o.limit < 0 {
			o.limit = 0
		}
	}
	o.contRaw = string(args.Peek("continue"))
	if v := args.Peek("timeoutSeconds"); len(v) > 0 {
		if o.timeout, err = strconv.ParseInt(string(v), 10, 64); err != nil || o.timeout < 0 {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid timeoutSeconds %q", v))
		}
	}
	if v := args.Peek("allowWatchBookmarks"); len(v) > 0 {
		b, err := strconv.ParseBool(string(v))
		if err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid allowWatchBookmarks %q", v))
		}
		o.bookmark = b
	}
	if v := args.Peek("sendInitialEvents"); len(v) > 0 {
		b, err := strconv.ParseBool(string(v))
		if err != nil {
			return nil, apierror.BadRequest(fmt.Sprintf("invalid sendInitialEvents %q", v))
		}
		o.sendInitialEvents = &b
	}
	if len(args.Peek("shardSelector")) > 0 {
		return nil, apierror.BadRequest("shardSelector is not supported")
	}
	if err := o.validate(res); err != nil {
		return nil, err
	}
	return o, nil
}

func invalidRV(v string) error {
	return apierror.BadRequest(fmt.Sprintf("invalid resource version: %q", v))
}

// validate applies kube-apiserver's ListOptions rules.
func (o *listOptions) validate(res *registry.Resource) error {
	switch o.resourceVersionMatch {
	case "", metav1.ResourceVersionMatchNotOlderThan, metav1.ResourceVersionMatchExact:
	default:
		return invalidList("resourceVersionMatch", string(o.resourceVersionMatch), "must be one of NotOlderThan, Exact or unset")
	}
	if o.watch {
		if o.resourceVersionMatch != "" && o.sendInitialEvents == nil {
			return invalidList("resourceVersionMatch", string(o.resourceVersionMatch), "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
		}
		if o.sendInitialEvents != nil {
			if o.resourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
				return invalidList("resourceVersionMatch", string(o.resourceVersionMatch), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
			}
			if *o.sendInitialEvents && !o.bookmark {
				return invalidList("allowWatchBookmarks", "false", "sendInitialEvents requires setting allowWatchBookmarks to true")
			}
		}
		return nil
	}
	if o.sendInitialEvents != nil {
		return invalidList("sendInitialEvents", strconv.FormatBool(*o.sendInitialEvents), "sendInitialEvents is forbidden for list")
	}
	if o.resourceVersionMatch != "" && o.resourceVersion == "" {
		return invalidList("resourceVersionMatch", string(o.resourceVersionMatch), "resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	if o.resourceVersionMatch == metav1.ResourceVersionMatchExact && o.rv == 0 {
		return invalidList("resourceVersionMatch", "Exact", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
	}
	if o.contRaw != "" {
		if o.resourceVersion != "" && o.resourceVersion != "0" {
			return invalidList("resourceVersion", o.resourceVersion, "specifying resource version is not allowed when using continue")
		}
		if o.resourceVersionMatch != "" {
			return invalidList("resourceVersionMatch", string(o.resourceVersionMatch), "resourceVersionMatch is forbidden when continue is provided")
		}
		tok, err := decodeContinue(o.contRaw, res)
		if err != nil {
			return apierror.BadRequest(fmt.Sprintf("continue key is not valid: %v", err))
		}
		o.cont = tok
	}
	return nil
}

func invalidList(field, value, detail string) error {
	return apierror.Invalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", fieldErrors(field, value, detail))
}

// latestContinue is the resource version of a token that continues at the
// latest revision (an inconsistent continuation), as kube-apiserver's.
const latestContinue = -1

// continueToken is kube-apiserver's continue token: base64 of
// {"v":"meta.k8s.io/v1","rv":N,"start":"<key after the resource prefix>"}.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// encodeContinue makes the token of the page after lastKey, read at rev.
// Like kube-apiserver, the key is stored relative to the resource prefix
// and the start is just after lastKey.
func encodeContinue(res *registry.Resource, lastKey string, rev int64) (string, error) {
	rel := strings.TrimPrefix(lastKey, res.Prefix+"/")
	return encodeToken(rel+"\x00", rev)
}

func encodeToken(start string, rev int64) (string, error) {
	b, err := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: rev, StartKey: start})
	if err != nil {
		return "", fmt.Errorf("cannot encode continue token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// fresh is the token that continues t at the latest revision.
func (t *continueToken) fresh() (string, error) { return encodeToken(t.StartKey, latestContinue) }

func decodeContinue(s string, res *registry.Resource) (*continueToken, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	var t continueToken
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("not a token: %w", err)
	}
	if t.APIVersion != "meta.k8s.io/v1" {
		return nil, fmt.Errorf("unknown version %q", t.APIVersion)
	}
	// -1 continues at the latest revision: the token an expired
	// continue's 410 hands out.
	if t.ResourceVersion <= 0 && t.ResourceVersion != latestContinue {
		return nil, fmt.Errorf("bad resource version %d", t.ResourceVersion)
	}
	if t.StartKey == "" || strings.HasPrefix(t.StartKey, "/") || strings.Contains(t.StartKey, "..") {
		return nil, fmt.Errorf("bad start key")
	}
	return &t, nil
}

// afterKey returns the exclusive start key a token resumes after.
func (t *continueToken) afterKey(res *registry.Resource) string {
	return res.Prefix + "/" + strings.TrimSuffix(t.StartKey, "\x00")
}
