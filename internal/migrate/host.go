package migrate

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/lazyregexp"
	"github.com/hutchsandbox/hutch/internal/office"
	"github.com/hutchsandbox/hutch/internal/vault"
)

// Texts of the host-side blockers.
var (
	unownedText = map[Area]string{
		AreaWorkspace: "Unowned conversation directory: ",
		AreaState:     "Unowned conversation state directory: ",
		AreaVault:     "Unowned conversation vault: ",
	}
	conflictWord = map[Area]string{
		AreaWorkspace: "office",
		AreaState:     "host state",
		AreaVault:     "vault",
	}
)

const (
	msgStateSymlink = "Host state entry must not be a symlink: "
	msgVaultSymlink = "Vault entry must not be a symlink: "
)

// Names of the host-side trees in the state dir.
const (
	conversationsDir = "conversations"
	vaultsDir        = "vaults"
)

// planHost plans the vault and host state moves. A raw id's owner is, in
// order: the owner its migration record names, the owner of its planned
// workspace move, an operator's claim, the one platform the registry holds
// an office of it on, and finally inference from the enabled platforms.
// A raw id the registry knows on several platforms, with nothing else to
// settle it, is unowned: its legacy vault cannot be given to either.
//
// A legacy vault has one of two names: the hashed per-conversation key of
// the later raw-id releases (vault.ConversationKey), or the bare
// sanitized raw id of the oldest (see vault.SanitizedName). It returns every raw
// id it considered.
func (p *Plan) planHost(in Input, enabled []office.Platform, records map[string]office.MigrationRecord) map[string]bool {
	settled := map[string]office.Platform{}
	for id, r := range records {
		if r.OwnerPlatform != "" && r.Status != office.MigrationFailed {
			settled[id] = r.OwnerPlatform
		}
	}
	for _, m := range p.Moves {
		settled[m.RawID] = m.Owner
	}
	for _, r := range p.Recoveries {
		settled[r.RawID] = r.Owner
	}
	for id, owner := range in.Claims {
		if _, ok := settled[id]; !ok {
			settled[id] = owner
		}
	}
	onPlatforms := map[string][]office.Platform{}
	for _, o := range in.Offices {
		onPlatforms[o.ConversationID] = append(onPlatforms[o.ConversationID], o.Platform)
	}
	ownerOf := func(id string) (office.Platform, bool) {
		if owner, ok := settled[id]; ok {
			return owner, true
		}
		if ps := uniquePlatforms(onPlatforms[id]); len(ps) > 0 {
			return ps[0], len(ps) == 1
		}
		return OwnerOf(id, enabled)
	}

	stateRoot := filepath.Join(filepath.Clean(in.StateDir), conversationsDir)
	stateExists := names(in.StateEntries)
	// Every raw id that could have host state or a vault: the ones
	// planned or recorded, the registry's offices, and the raw-id
	// directories under <state>/conversations.
	known := map[string]bool{}
	for id := range settled {
		known[id] = true
	}
	for id := range onPlatforms {
		known[id] = true
	}
	entries := slices.Clone(in.StateEntries)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range entries {
		path := filepath.Join(stateRoot, e.Name)
		switch {
		case strings.HasPrefix(e.Name, "."), office.LooksLikeKey(e.Name), office.ValidateConversationID(e.Name) != nil:
			continue
		case e.IsSymlink:
			p.Refused = append(p.Refused, msgStateSymlink+path)
			continue
		case !e.IsDir:
			continue
		}
		known[e.Name] = true
		owner, ok := ownerOf(e.Name)
		if !ok {
			p.Unowned = append(p.Unowned, Unowned{Area: AreaState, RawID: e.Name, Source: path})
			continue
		}
		k := office.Address{Platform: owner, ConversationID: e.Name}.Key()
		p.hostMove(AreaState, e.Name, owner, k, path, filepath.Join(stateRoot, string(k)), stateExists[string(k)])
	}

	vaultRoot := filepath.Join(filepath.Clean(in.StateDir), vaultsDir)
	vaults := make(map[string]Entry, len(in.VaultEntries))
	for _, e := range in.VaultEntries {
		vaults[e.Name] = e
	}
	ids := make([]string, 0, len(known))
	for id := range known {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Sanitizing loses case and punctuation: C1 and c1 share a name.
	bySanitized := map[string][]string{}
	for _, id := range ids {
		if s, ok := sanitizedVault(id); ok {
			bySanitized[s] = append(bySanitized[s], id)
		}
	}
	for _, id := range ids {
		var sources []string
		if _, ok := vaults[vault.ConversationKey(id)]; ok {
			sources = append(sources, vault.ConversationKey(id))
		}
		if s, ok := sanitizedVault(id); ok && len(bySanitized[s]) == 1 {
			if _, ok := vaults[s]; ok {
				sources = append(sources, s)
			}
		}
		refused := false
		for _, name := range sources {
			if vaults[name].IsSymlink {
				// Renamed, it would become the office vault, and whatever
				// it points at would be projected into the runtime.
				p.Refused = append(p.Refused, msgVaultSymlink+filepath.Join(vaultRoot, name))
				refused = true
			}
		}
		if refused || len(sources) == 0 {
			continue
		}
		owner, ok := ownerOf(id)
		if !ok {
			for _, name := range sources {
				p.Unowned = append(p.Unowned, Unowned{Area: AreaVault, RawID: id, Source: filepath.Join(vaultRoot, name)})
			}
			continue
		}
		k := office.Address{Platform: owner, ConversationID: id}.Key()
		first := filepath.Join(vaultRoot, sources[0])
		p.hostMove(AreaVault, id, owner, k, first, filepath.Join(vaultRoot, string(k)), vaults[string(k)].Name != "")
		if len(sources) == 2 {
			p.Conflicts = append(p.Conflicts, Conflict{Area: AreaVault, RawID: id, Source: filepath.Join(vaultRoot, sources[1]), Target: first, Error: MsgBothLegacyVaults})
		}
	}

	// Vaults that have the sanitized shape and fit no one conversation.
	// Every name the current layout gives a vault (office keys, hashed
	// identity keys, the reserved names) is excluded, so what is left can
	// only be a vault of the oldest releases.
	names := make([]string, 0, len(vaults))
	for name := range vaults {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e := vaults[name]
		if !e.IsDir && !e.IsSymlink || !sanitizedShape.MatchString(name) || !notCurrentName(name) {
			continue
		}
		switch owners := bySanitized[name]; len(owners) {
		case 0:
			p.Stray = append(p.Stray, Stray{Source: filepath.Join(vaultRoot, name)})
		case 1:
			// Moved, conflicting or blocked above.
		default:
			p.Stray = append(p.Stray, Stray{Source: filepath.Join(vaultRoot, name), RawIDs: owners})
		}
	}
	return known
}

// sanitizedShape is what vault.SanitizedName returns.
var sanitizedShape = lazyregexp.New(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// identityShape ends every hashed identity key (vault.UserKey,
// ContainerKey, ConversationKey): "-" and 12 hex digits.
var identityShape = lazyregexp.New(`-[0-9a-f]{12}$`)

// notCurrentName reports whether a vault name is none the current layout
// gives: not an office key, not a hashed identity key and not reserved.
func notCurrentName(name string) bool {
	return !office.LooksLikeKey(name) && !identityShape.MatchString(name) && vault.ValidateKey(name) == nil
}

// sanitizedVault returns the name the oldest releases gave rawID's vault,
// unless that name is one the current layout uses for other vaults. A raw
// id is data an agent can choose (a web conversation's id, a directory
// planted in a workspace its door grants): a conversation named "Shared"
// or after a user's vault key must not be handed the named profiles or
// that user's credentials. No id of the platforms those releases served
// (Slack's C0123ABC, Telegram's and Discord's digits) sanitizes to such a
// name, so nothing real is lost.
func sanitizedVault(rawID string) (string, bool) {
	s := vault.SanitizedName(rawID)
	return s, notCurrentName(s)
}

// planForeign finds the containers hutch does not manage that bind a
// raw-id path: the workspace directory, host state or legacy vault of any
// raw id this workspace has or had, or anything below one.
func (p *Plan) planForeign(in Input, root string, rawIDs map[string]bool) {
	if len(in.Containers) == 0 || len(rawIDs) == 0 {
		return
	}
	paths := map[string]string{}
	for id := range rawIDs {
		paths[filepath.Join(root, id)] = id
		if in.StateDir == "" {
			continue
		}
		state := filepath.Clean(in.StateDir)
		paths[filepath.Join(state, conversationsDir, id)] = id
		paths[filepath.Join(state, vaultsDir, vault.ConversationKey(id))] = id
		if s, ok := sanitizedVault(id); ok {
			paths[filepath.Join(state, vaultsDir, s)] = id
		}
	}
	for _, c := range in.Containers {
		sources := slices.Clone(c.Sources)
		slices.Sort(sources)
		for _, src := range sources {
			if id, ok := under(paths, src); ok {
				p.Foreign = append(p.Foreign, Foreign{Name: c.Name, ID: c.ID, RawID: id, Source: src})
				break
			}
		}
	}
	slices.SortFunc(p.Foreign, func(a, b Foreign) int { return strings.Compare(a.Name+"\x00"+a.ID, b.Name+"\x00"+b.ID) })
}

// under looks src and each of its parents up in paths.
func under(paths map[string]string, src string) (string, bool) {
	if !filepath.IsAbs(src) {
		return "", false
	}
	for p := filepath.Clean(src); ; p = filepath.Dir(p) {
		if id, ok := paths[p]; ok {
			return id, true
		}
		if p == filepath.Dir(p) {
			return "", false
		}
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func (p *Plan) hostMove(area Area, id string, owner office.Platform, k office.Key, source, target string, targetExists bool) {
	if targetExists {
		p.Conflicts = append(p.Conflicts, Conflict{Area: area, RawID: id, Source: source, Target: target, Error: MsgTargetExists})
		return
	}
	p.HostMoves = append(p.HostMoves, HostMove{Area: area, RawID: id, Owner: owner, Key: k, Source: source, Target: target})
}

func names(entries []Entry) map[string]bool {
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		out[e.Name] = true
	}
	return out
}
