package faultinject

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// Paths inside the docker backend's image.
const (
	imageRepo          = "quorumlock/redis-scratch"
	imageRedisServer   = "/usr/local/bin/redis-server"
	imageShim          = "/opt/quorumlock/mallocshim.so"
	imageLibfaketime   = "/opt/quorumlock/libfaketime.so.1"
	imageFaketimeDir   = "/faketime" // bind mount of a host dir holding the timestamp file
	imageTimestampFile = imageFaketimeDir + "/timestamp"
)

// imageDockerfile is the whole Dockerfile: the root file system comes from
// the build context, assembled from the host's files.
const imageDockerfile = `FROM scratch
COPY rootfs/ /
LABEL quorumlock.image=redis-scratch
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["` + imageRedisServer + `"]
`

// redisImage is a locally built image of the host's redis-server.
type redisImage struct {
	tag      string
	faketime bool          // libfaketime and the malloc shim are in the image
	noSkew   error         // why not, when faketime is false
	build    time.Duration // 0 when the image already existed
	size     int64         // bytes of files in the image
}

var (
	imageMu     sync.Mutex
	imageCached *redisImage
)

// ensureRedisImage returns the docker backend's image, building it when no
// image with its content hash exists. The image is FROM scratch: the host's
// redis-server (the real file, named redis-server: Debian's redis-server is a
// symlink to redis-check-rdb, which picks its mode from argv[0]), every
// library ldd lists for it, the dynamic loader, and, when clockskew is
// available, libfaketime and the malloc shim with their libraries. The tag is
// quorumlock/redis-scratch:<hash of every file and the Dockerfile>, so a
// second build is a no-op and a host upgrade makes a new image. The result is
// cached for the life of the process; safe for concurrent use.
func ensureRedisImage(ctx context.Context, client *dc.Client) (*redisImage, error) {
	imageMu.Lock()
	defer imageMu.Unlock()
	if imageCached != nil {
		return imageCached, nil
	}
	begin := time.Now()
	files, img, err := imageFiles(ctx)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	io.WriteString(h, imageDockerfile)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	contents := make(map[string][]byte, len(files))
	for _, p := range paths {
		b, err := os.ReadFile(files[p])
		if err != nil {
			return nil, fmt.Errorf("faultinject: docker image: reading %s: %w", files[p], err)
		}
		contents[p] = b
		img.size += int64(len(b))
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	img.tag = imageRepo + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	if _, err := client.InspectImage(img.tag); err == nil {
		imageCached = img
		return img, nil
	} else if !errors.Is(err, dc.ErrNoSuchImage) {
		return nil, fmt.Errorf("faultinject: docker image %s: inspecting: %w", img.tag, err)
	}
	buildCtx, err := imageContext(paths, contents)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = client.BuildImage(dc.BuildImageOptions{
		Name:                img.tag,
		InputStream:         bytes.NewReader(buildCtx),
		OutputStream:        &out,
		RmTmpContainer:      true,
		ForceRmTmpContainer: true,
		Labels:              map[string]string{"quorumlock.image": "redis-scratch"},
		Context:             ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("faultinject: building docker image %s: %w\n%s", img.tag, err, tailString(out.String(), 2000))
	}
	img.build = time.Since(begin)
	imageCached = img
	return img, nil
}

// imageFiles maps each file of the image (path inside the image) to the host
// file whose content it gets.
func imageFiles(ctx context.Context) (map[string]string, *redisImage, error) {
	bin, err := redisproc.LookPath()
	if err != nil {
		return nil, nil, err
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil, nil, fmt.Errorf("faultinject: docker image: resolving %s: %w", bin, err)
	}
	files := map[string]string{imageRedisServer: real}
	img := &redisImage{}
	elfs := []string{real}
	if err := clockskew.Available(); err != nil {
		img.noSkew = err
	} else {
		kit, err := clockskew.Prepare(ctx, "")
		if err != nil {
			img.noSkew = err
		} else {
			img.faketime = true
			files[imageShim] = kit.ShimPath()
			files[imageLibfaketime] = kit.LibfaketimePath()
			elfs = append(elfs, kit.ShimPath(), kit.LibfaketimePath())
		}
	}
	for _, elf := range elfs {
		libs, err := lddPaths(ctx, elf)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range libs {
			files[l] = l // same path inside: the loader's default search dirs find it
		}
	}
	return files, img, nil
}

// lddPaths returns the absolute paths of the shared libraries (and the
// loader) ldd lists for file.
func lddPaths(ctx context.Context, file string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", file).Output()
	if err != nil {
		return nil, fmt.Errorf("faultinject: docker image: ldd %s: %w (ldd comes with libc-bin)", file, err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)" or "linux-vdso.so.1 (0x...)".
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "=>"); i >= 0 {
			line = strings.TrimSpace(line[i+2:])
		}
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
			if strings.Contains(line, "not found") {
				return nil, fmt.Errorf("faultinject: docker image: ldd %s: %s", file, sc.Text())
			}
			continue
		}
		paths = append(paths, f[0])
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("faultinject: docker image: ldd %s listed no libraries:\n%s", file, out)
	}
	return paths, nil
}

// imageContext builds the docker build context: the Dockerfile and rootfs/
// with every file, plus the empty directories redis-server needs.
func imageContext(paths []string, contents map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Unix(0, 0)
	add := func(h *tar.Header, body []byte) error {
		h.ModTime, h.Uid, h.Gid, h.Format = now, 0, 0, tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := add(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(imageDockerfile)), Typeflag: tar.TypeReg}, []byte(imageDockerfile)); err != nil {
		return nil, err
	}
	dirs := map[string]int64{"rootfs/": 0o755, "rootfs/tmp/": 0o1777, "rootfs/data/": 0o755, "rootfs" + imageFaketimeDir + "/": 0o755}
	for _, p := range paths {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			if _, ok := dirs["rootfs"+d+"/"]; !ok {
				dirs["rootfs"+d+"/"] = 0o755
			}
		}
	}
	dnames := make([]string, 0, len(dirs))
	for d := range dirs {
		dnames = append(dnames, d)
	}
	sort.Strings(dnames)
	for _, d := range dnames {
		if err := add(&tar.Header{Name: d, Mode: dirs[d], Typeflag: tar.TypeDir}, nil); err != nil {
			return nil, err
		}
	}
	for _, p := range paths {
		if err := add(&tar.Header{Name: "rootfs" + p, Mode: 0o755, Size: int64(len(contents[p])), Typeflag: tar.TypeReg}, contents[p]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
