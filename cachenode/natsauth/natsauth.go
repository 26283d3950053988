// Package natsauth is who may do what on kgate's NATS: the users of the two
// roles, the subjects each may publish and subscribe to, and the file their
// credentials are kept in. Cache nodes publish events, progress and their
// status; gateways only subscribe to them, and publish nothing but a
// directory probe, progress requests and audit events (on AuditSubject
// and below). The
// embedded server (natsembed) and `kgate pki` (a nats-server configuration
// for an external server) apply the same table.
package natsauth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kgate/kgate/cachenode/directory"
	"github.com/kgate/kgate/cachenode/event"
)

// Roles, which are also the default user names.
const (
	RoleGateway   = "gateway"
	RoleCacheNode = "cachenode"
)

// AuditSubject: gateways may publish audit events on AuditSubject
// and the subjects under it (--audit-nats-subject must be one of them).
const AuditSubject = "kgate.audit"

// AuditAllowed reports whether gateways may publish audit events on
// subject: AuditSubject or a subject below it.
func AuditAllowed(subject string) bool {
	return subject == AuditSubject || strings.HasPrefix(subject, AuditSubject+".") && !strings.HasSuffix(subject, ".")
}

// ErrBadCredentials: a credentials file is not one "user:password" line.
var ErrBadCredentials = errors.New("natsauth: malformed credentials")

// Permissions are the subjects a role may publish and subscribe to (NATS
// wildcards allowed); everything else is denied.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// For returns the permissions of role, or false for an unknown role.
func For(role string) (Permissions, bool) {
	events := event.SubjectPrefix + ".>"
	progress := event.ProgressSubjectPrefix + ".>"
	status := directory.SubjectPrefix + ">"
	// Gateways ask a quiet range's primary for its progress (merged
	// watches); the primaries answer on the progress subjects.
	requests := event.ProgressRequestPrefix + ".>"
	switch role {
	case RoleCacheNode:
		return Permissions{
			Publish:   []string{events, progress, status, directory.ProbeSubject},
			Subscribe: []string{status, directory.ProbeSubject, requests},
		}, true
	case RoleGateway:
		return Permissions{
			Publish:   []string{directory.ProbeSubject, requests, AuditSubject, AuditSubject + ".>"},
			Subscribe: []string{events, progress, status},
		}, true
	}
	return Permissions{}, false
}

// Credentials are a user name and password.
type Credentials struct {
	User     string
	Password string
}

// Format is the content of a credentials file: "user:password\n".
func (c Credentials) Format() []byte { return []byte(c.User + ":" + c.Password + "\n") }

// Parse reads what Format wrote (surrounding whitespace ignored).
func Parse(b []byte) (Credentials, error) {
	user, pass, ok := strings.Cut(string(bytes.TrimSpace(b)), ":")
	if !ok || user == "" || pass == "" || strings.ContainsAny(user, " \t\r\n") || strings.ContainsAny(pass, "\r\n") {
		return Credentials{}, ErrBadCredentials
	}
	return Credentials{User: user, Password: pass}, nil
}

// ReadFile reads a credentials file.
func ReadFile(name string) (Credentials, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return Credentials{}, fmt.Errorf("cannot read NATS credentials: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Credentials{}, fmt.Errorf("cannot read NATS credentials %s: %w", name, err)
	}
	return c, nil
}
