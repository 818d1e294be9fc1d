package migrate

import (
	"path/filepath"
	"slices"
	"strings"

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

const msgStateSymlink = "Host state entry must not be a symlink: "

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
func (p *Plan) planHost(in Input, enabled []office.Platform, records map[string]office.MigrationRecord) {
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
	vaultExists := names(in.VaultEntries)
	ids := make([]string, 0, len(known))
	for id := range known {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		legacy := vault.ConversationKey(id)
		if !vaultExists[legacy] {
			continue
		}
		path := filepath.Join(vaultRoot, legacy)
		owner, ok := ownerOf(id)
		if !ok {
			p.Unowned = append(p.Unowned, Unowned{Area: AreaVault, RawID: id, Source: path})
			continue
		}
		k := office.Address{Platform: owner, ConversationID: id}.Key()
		p.hostMove(AreaVault, id, owner, k, path, filepath.Join(vaultRoot, string(k)), vaultExists[string(k)])
	}
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
