package dockercluster

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// UID and GID the images run as (their USER): the files a container gets
// belong to it, so keys can stay 0600.
const (
	UID = 65532
	GID = 65532
)

// File is one file a container gets before it starts.
type File struct {
	// Path is absolute inside the container.
	Path string
	Data []byte
	Mode int64
}

// archive is a tar of files and of the directories dirs (created empty,
// 0700), all owned by UID:GID, for `docker cp -a - container:/`; parent
// directories are created 0755.
func archive(files []File, dirs ...string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	made := map[string]bool{}
	mtime := time.Unix(0, 0)
	mkdir := func(d string, mode int64) error {
		if d == "" || made[d] {
			return nil
		}
		made[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, Uid: UID, Gid: GID, ModTime: mtime})
	}
	parents := func(p string) error {
		parts := strings.Split(strings.Trim(path.Dir(p), "/"), "/")
		for i := range parts {
			if err := mkdir(strings.Join(parts[:i+1], "/"), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range dirs {
		if !path.IsAbs(d) {
			return nil, fmt.Errorf("cannot add directory %q: not absolute", d)
		}
		if err := parents(d); err != nil {
			return nil, err
		}
		if err := mkdir(strings.Trim(d, "/"), 0o700); err != nil {
			return nil, err
		}
	}
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range files {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("cannot add file %q: not absolute", f.Path)
		}
		if err := parents(f.Path); err != nil {
			return nil, err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Size: int64(len(f.Data)), Uid: UID, Gid: GID, ModTime: mtime}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("cannot archive %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("cannot archive %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("cannot archive: %w", err)
	}
	return buf.Bytes(), nil
}
