package main

import (
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// moduleZip writes the zip of module m, the files git holds in dir at the
// commit, as the go command makes it from a tag: git archive's files, the
// repository's LICENSE added to a module in a sub-directory that has none,
// then golang.org/x/mod/zip's rules (nested modules, vendor and unwanted
// files left out, limits checked). It does what zip.CreateFromVCS does, and
// also works in a linked work tree (git worktree), which CreateFromVCS does
// not recognise.
func (r *repo) moduleZip(w io.Writer, m module.Version, dir string) error {
	args := []string{"-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", r.commit}
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
		args = append(args, prefix)
	}
	archive, err := git(r.root, args...)
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(strings.NewReader(archive), int64(len(archive)))
	if err != nil {
		return err
	}
	var files []modzip.File
	haveLicense := false
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		files = append(files, archived{name, f})
		haveLicense = haveLicense || name == "LICENSE"
	}
	if !haveLicense && prefix != "" {
		if license, err := r.file("LICENSE"); err == nil {
			files = append(files, inline{"LICENSE", license})
		}
	}
	return modzip.Create(w, m, files)
}

// archived is a file of git archive's zip.
type archived struct {
	name string
	f    *zip.File
}

func (a archived) Path() string                { return a.name }
func (a archived) Lstat() (fs.FileInfo, error) { return a.f.FileInfo(), nil }
func (a archived) Open() (io.ReadCloser, error) {
	return a.f.Open()
}

// inline is a file whose content is at hand.
type inline struct {
	name string
	data []byte
}

func (f inline) Path() string                 { return f.name }
func (f inline) Lstat() (fs.FileInfo, error)  { return inlineInfo{f}, nil }
func (f inline) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type inlineInfo struct{ f inline }

func (i inlineInfo) Name() string       { return path.Base(i.f.name) }
func (i inlineInfo) Size() int64        { return int64(len(i.f.data)) }
func (i inlineInfo) Mode() fs.FileMode  { return 0o644 }
func (i inlineInfo) ModTime() time.Time { return time.Time{} }
func (i inlineInfo) IsDir() bool        { return false }
func (i inlineInfo) Sys() any           { return nil }
