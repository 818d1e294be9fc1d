package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hutchsandbox/hutch/internal/engine"
	"github.com/hutchsandbox/hutch/internal/errdefs"
	"github.com/hutchsandbox/hutch/internal/sandbox"
	"github.com/hutchsandbox/hutch/internal/sandbox/managed"
)

// PodName is the pod of an office. Office keys are lower-case letters,
// digits and dashes, so the name is a valid DNS subdomain.
func PodName(officeKey string) string { return "hutch-" + officeKey }

// SecretName is the Secret holding an office's vault files.
func SecretName(officeKey string) string { return "hutch-vault-" + officeKey }

// Names and paths inside a pod.
const (
	containerName = "sandbox"
	installName   = "agent-install"

	agentDir   = "/hutch/bin"
	agentPath  = agentDir + "/hutch"
	runDir     = "/hutch/run"
	installDir = "/hutch-bin"

	volAgent     = "hutch-agent"
	volRun       = "hutch-run"
	volWorkspace = "workspace"
	volVault     = "hutch-vault"
)

// Why a pod was re-created (sandbox.Status.RecreatedBecause). A pod that
// ended gives its reason after recreatedEnded.
const (
	recreatedDrift  = "what it was built from changed"
	recreatedEnded  = "the pod ended: "
	recreatedResize = "the cluster could not resize it in place"
	// recreatedNetwork: it changed between open, proxied (allowlist or
	// none) and relayed (open with placeholder secrets).
	recreatedNetwork = "what it was built from changed (its network: sandbox.network or placeholder secrets)"
)

// Keys hutch puts on what it creates in the cluster. Labels select (they
// must be short label values); annotations carry what is too long or
// free-form for a label. The label keys are the managed containers'.
const (
	labelInstallation = "hutch.installation"
	annotationBoost   = "hutch.boost"
	annotationTemp    = "hutch.temp-limits"
	annotationVault   = "hutch.vault-digest"
	// annotationLastUsed is when a replica last used the pod (RFC 3339).
	annotationLastUsed = "hutch.last-used"
)

// hardeningVersion changes whenever the pod's security settings change in
// a way existing pods should pick up.
const hardeningVersion = 1

// maxSecretBytes is what hutch puts into one Secret: the API server
// refuses Secrets over 1 MiB, and keys and encoding need some room.
const maxSecretBytes = 1<<20 - 64<<10

// Storage is how pods reach the workspace root.
type Storage struct {
	// HostPath is the workspace root's path on the nodes; empty (and no
	// Claim) means the path hutch itself sees, as on a single node.
	HostPath string `json:"hostPath,omitempty"`
	// Claim is a PersistentVolumeClaim (ReadWriteMany, so every node can
	// mount it) holding the workspace root.
	Claim string `json:"claim,omitempty"`
}

// String names the storage for messages.
func (s Storage) String() string {
	if s.Claim != "" {
		return "pvc:" + s.Claim
	}
	if s.HostPath != "" {
		return "hostPath:" + s.HostPath
	}
	return "hostPath"
}

// subMount is one door-policy mount as a volume mount of the workspace.
type subMount struct {
	MountPath string `json:"mountPath"`
	SubPath   string `json:"subPath"`
	ReadOnly  bool   `json:"readOnly"`
}

// vaultMount is one vault file (or directory) projected from the Secret.
type vaultMount struct {
	MountPath string `json:"mountPath"`
	Digest    string `json:"digest"`
	// items are the Secret's keys and paths for this entry; not part of
	// the fingerprint (the digest is), and never logged.
	items []vaultItem
	// subPath is where the entry lies inside the Secret volume.
	subPath string
}

// vaultItem is one file of the Secret: its key, its path in the Secret
// volume, and the host file it is read from when the Secret is made.
type vaultItem struct {
	key, path, host string
}

// desired is what an office's pod must be built from; its hash is the
// pod's fingerprint. Limits are not in it: they change in place.
type desired struct {
	Namespace    string            `json:"namespace"`
	Image        string            `json:"image"`
	AgentImage   string            `json:"agentImage"`
	Agent        string            `json:"agent"`
	WorkDir      string            `json:"workDir"`
	Storage      Storage           `json:"storage"`
	Mounts       []subMount        `json:"mounts"`
	Vault        []vaultMount      `json:"vault"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	RuntimeClass string            `json:"runtimeClass,omitempty"`
	Hardening    int               `json:"hardening"`
	// Egress is the pod's hutch.egress label, "" when it does not relay
	// (see egress.go); EgressCA a digest of the egress CA its agent
	// trusts.
	Egress   string `json:"egress,omitempty"`
	EgressCA string `json:"egressCA,omitempty"`
	// Disk is the container's ephemeral-storage limit (the disk
	// ceiling): the kubelet evicts a pod whose writable layer and
	// scratch volumes grow past it. Not in the fingerprint: a new
	// ceiling applies to pods made after it, it re-creates none.
	Disk int64 `json:"-"`
}

func (d desired) fingerprint() string {
	c := d
	c.Mounts = slices.Clone(d.Mounts)
	slices.SortFunc(c.Mounts, func(a, b subMount) int { return strings.Compare(a.MountPath, b.MountPath) })
	data, _ := json.Marshal(c)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// vaultDigest is one digest over every vault entry, recorded on the
// Secret so a replica can tell whether it holds the current files.
func (d desired) vaultDigest() string {
	h := sha256.New()
	for _, v := range d.Vault {
		fmt.Fprintf(h, "%s\x00%s\x00", v.MountPath, v.Digest)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// subPath maps a host path under the workspace root to its path inside
// the workspace volume. Paths elsewhere are on no storage a pod reaches.
func subPath(workspace, hostPath string) (string, error) {
	rel, err := filepath.Rel(workspace, hostPath)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"kube mode mounts only what lies under the workspace root %s (the volume every node reaches); %s is outside it", workspace, hostPath))
	}
	if rel == "." {
		return "", nil
	}
	return filepath.ToSlash(rel), nil
}

// planMounts translates the door policy's projection into subPath mounts.
func planMounts(workspace string, mounts []sandbox.Mount) ([]subMount, error) {
	out := make([]subMount, 0, len(mounts))
	for _, m := range mounts {
		sp, err := subPath(workspace, m.HostPath)
		if err != nil {
			return nil, err
		}
		out = append(out, subMount{MountPath: m.RuntimePath, SubPath: sp, ReadOnly: m.ReadOnly})
	}
	return out, nil
}

// planVault maps the vault's file credentials to Secret items: a file
// becomes one key, a directory one key per regular file under it. Each
// entry's digest (managed.DigestTree) goes into the fingerprint. Nothing
// is read into memory here: this runs before every command, and only a
// pod being made needs the contents (buildSecret).
func planVault(files []sandbox.Mount) ([]vaultMount, error) {
	var out []vaultMount
	for i, f := range files {
		dg, err := managed.DigestTree(f.HostPath)
		if err != nil {
			return nil, err
		}
		vm := vaultMount{MountPath: f.RuntimePath, Digest: dg, subPath: "v" + strconv.Itoa(i)}
		info, err := os.Stat(f.HostPath)
		if err != nil {
			return nil, fmt.Errorf("vault entry: %w", err)
		}
		if !info.IsDir() {
			vm.items = []vaultItem{{key: vm.subPath, path: vm.subPath, host: f.HostPath}}
		} else {
			n := 0
			err := filepath.WalkDir(f.HostPath, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				rel, _ := filepath.Rel(f.HostPath, p)
				vm.items = append(vm.items, vaultItem{key: vm.subPath + "-" + strconv.Itoa(n), path: vm.subPath + "/" + filepath.ToSlash(rel), host: p})
				n++
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("vault entry: %w", err)
			}
		}
		out = append(out, vm)
	}
	return out, nil
}

// owner is who a pod belongs to: this hutch installation and an office.
type owner struct {
	stateDir       string
	officeKey      string
	platform, conv string
}

// installation is the label value that marks what one hutch installation
// (one state dir) made: a digest, since paths are not label values.
func installation(stateDir string) string {
	sum := sha256.Sum256([]byte("kube-installation\x00" + stateDir))
	return hex.EncodeToString(sum[:8])
}

func (o owner) labels() map[string]string {
	l := map[string]string{
		engine.LabelManaged: "true",
		engine.LabelMode:    string(sandbox.KindKube),
		labelInstallation:   installation(o.stateDir),
	}
	if len(o.officeKey) <= 63 {
		l[engine.LabelOffice] = o.officeKey
	}
	return l
}

func (o owner) annotations() map[string]string {
	return map[string]string{
		engine.LabelOffice:       o.officeKey,
		engine.LabelPlatform:     o.platform,
		engine.LabelConversation: o.conv,
		engine.LabelStateDir:     o.stateDir,
	}
}

// buildSecret is the Secret of an office's vault files, read now; nil
// when the office has none. A Secret holds at most maxSecretBytes.
func buildSecret(o owner, d desired) (*corev1.Secret, error) {
	if len(d.Vault) == 0 {
		return nil, nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        SecretName(o.officeKey),
			Namespace:   d.Namespace,
			Labels:      o.labels(),
			Annotations: o.annotations(),
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{},
	}
	s.Annotations[annotationVault] = d.vaultDigest()
	total := 0
	for _, v := range d.Vault {
		for _, it := range v.items {
			data, err := os.ReadFile(it.host)
			if err != nil {
				return nil, fmt.Errorf("vault entry: %w", err)
			}
			s.Data[it.key] = data
			total += len(data) + len(it.key)
		}
	}
	if total > maxSecretBytes {
		return nil, errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(
			"The vault's files hold %d bytes; kube mode projects them from one Secret, which holds at most %d", total, maxSecretBytes))
	}
	return s, nil
}

// resources are a container's requests and limits. Limits are the caps;
// requests are a quarter of them, so that idle conversations do not
// reserve whole CPUs on a node (the pod is Burstable, and stays so
// across in-place resizes, which may not change the QoS class).
func resources(l sandbox.Limits) corev1.ResourceRequirements {
	cpu := max(int64(l.CPUs*1000+0.5), 1)
	return corev1.ResourceRequirements{
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(l.MemoryBytes, resource.BinarySI),
		},
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(max(cpu/4, 1), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(max(l.MemoryBytes/4, 1), resource.BinarySI),
		},
	}
}

// withDisk adds an ephemeral-storage limit of disk bytes (none when 0),
// requesting little of it (a request reserves node disk for the
// scheduler; a limit alone would request all of it).
func withDisk(r corev1.ResourceRequirements, disk int64) corev1.ResourceRequirements {
	if disk > 0 {
		r.Limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(disk, resource.BinarySI)
		r.Requests[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(min(disk, 64<<20), resource.BinarySI)
	}
	return r
}

// diskOf is the ephemeral-storage limit of requirements; 0 when none.
func diskOf(r corev1.ResourceRequirements) int64 {
	if q, ok := r.Limits[corev1.ResourceEphemeralStorage]; ok {
		return q.Value()
	}
	return 0
}

// limitsOf reads the caps back from requirements.
func limitsOf(r corev1.ResourceRequirements) sandbox.Limits {
	var l sandbox.Limits
	if q, ok := r.Limits[corev1.ResourceCPU]; ok {
		l.CPUs = float64(q.MilliValue()) / 1000
	}
	if q, ok := r.Limits[corev1.ResourceMemory]; ok {
		l.MemoryBytes = q.Value()
	}
	return l
}

func sameLimits(a, b sandbox.Limits) bool {
	return int64(a.CPUs*1000+0.5) == int64(b.CPUs*1000+0.5) && a.MemoryBytes == b.MemoryBytes
}

// hardened is the security context of both containers: image:'s
// capability set, no privilege escalation (no_new_privs), the runtime's
// default seccomp profile.
func hardened() *corev1.SecurityContext {
	caps := make([]corev1.Capability, len(managed.KeptCapabilities))
	for i, c := range managed.KeptCapabilities {
		caps[i] = corev1.Capability(c)
	}
	no := false
	return &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
		AllowPrivilegeEscalation: &no,
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// buildPod is an office's pod. The agent binary's hash is both in the
// fingerprint and checked by the init container.
func buildPod(o owner, d desired, workspace, agentSHA string, fp string, limits sandbox.Limits) *corev1.Pod {
	no, grace := false, int64(5)
	ann := o.annotations()
	ann[engine.LabelFingerprint] = fp
	ann[engine.LabelImage] = d.Image
	mounts := []corev1.VolumeMount{
		{Name: volAgent, MountPath: agentDir, ReadOnly: true},
		{Name: volRun, MountPath: runDir},
	}
	for _, m := range d.Mounts {
		mounts = append(mounts, corev1.VolumeMount{Name: volWorkspace, MountPath: m.MountPath, SubPath: m.SubPath, ReadOnly: m.ReadOnly})
	}
	for _, v := range d.Vault {
		mounts = append(mounts, corev1.VolumeMount{Name: volVault, MountPath: v.MountPath, SubPath: v.subPath, ReadOnly: true})
	}
	volumes := []corev1.Volume{
		{Name: volAgent, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volRun, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	if len(d.Mounts) > 0 {
		var src corev1.VolumeSource
		if d.Storage.Claim != "" {
			src.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.Storage.Claim}
		} else {
			path := d.Storage.HostPath
			if path == "" {
				path = workspace
			}
			typ := corev1.HostPathDirectory
			src.HostPath = &corev1.HostPathVolumeSource{Path: path, Type: &typ}
		}
		volumes = append(volumes, corev1.Volume{Name: volWorkspace, VolumeSource: src})
	}
	if len(d.Vault) > 0 {
		mode := int32(0o600)
		var items []corev1.KeyToPath
		for _, v := range d.Vault {
			for _, it := range v.items {
				items = append(items, corev1.KeyToPath{Key: it.key, Path: it.path})
			}
		}
		volumes = append(volumes, corev1.Volume{Name: volVault, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: SecretName(o.officeKey), Items: items, DefaultMode: &mode},
		}})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(o.officeKey),
			Namespace:   d.Namespace,
			Labels:      o.labels(),
			Annotations: ann,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  d.NodeSelector,
			InitContainers: []corev1.Container{{
				Name:                     installName,
				Image:                    d.AgentImage,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Command:                  []string{"/hutch", "agent", "--install-to", installDir + "/hutch", "--sha256", agentSHA},
				VolumeMounts:             []corev1.VolumeMount{{Name: volAgent, MountPath: installDir}},
				SecurityContext:          hardened(),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Resources:                resources(sandbox.Limits{CPUs: 0.2, MemoryBytes: 128 << 20}),
			}},
			Containers: []corev1.Container{{
				Name:                     containerName,
				Image:                    d.Image,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Command:                  []string{agentPath, "agent", "--init", "--listen", runDir + "/agent.sock"},
				WorkingDir:               d.WorkDir,
				VolumeMounts:             mounts,
				SecurityContext:          hardened(),
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Resources:                withDisk(resources(limits), d.Disk),
				ResizePolicy: []corev1.ContainerResizePolicy{
					{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
					{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired},
				},
			}},
			Volumes: volumes,
		},
	}
	if d.Egress != "" {
		pod.Labels[labelEgress] = d.Egress
	}
	if d.RuntimeClass != "" {
		rc := d.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	return pod
}
