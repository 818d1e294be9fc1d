package engine

// Label keys hutch puts on what it creates. The labels are the truth for
// which containers, networks and images exist and who owns them: hutch
// never stops or removes anything that does not carry LabelManaged.
const (
	// LabelManaged marks every container, network and image hutch made ("true").
	LabelManaged = "hutch.managed"
	// LabelMode is the mode kind that made it ("image").
	LabelMode = "hutch.mode"
	// LabelOffice is the office key of the conversation it serves.
	LabelOffice = "hutch.office"
	// LabelPlatform is the conversation's platform.
	LabelPlatform = "hutch.platform"
	// LabelConversation is the raw conversation id.
	LabelConversation = "hutch.conversation"
	// LabelFingerprint is the hash of what the runtime was built from.
	LabelFingerprint = "hutch.fingerprint"
	// LabelImageID is the id of the base image the runtime was created from
	// (not of a snapshot it was re-created from).
	LabelImageID = "hutch.image-id"
	// LabelImage is the image reference the runtime was asked to run.
	LabelImage = "hutch.image"
	// LabelStateDir names the state dir of the hutch that owns it, so two
	// hutch installations on one engine never adopt each other's runtimes.
	LabelStateDir = "hutch.state-dir"
	// LabelSnapshotOf marks a snapshot image with the container it preserves.
	LabelSnapshotOf = "hutch.snapshot-of"
)
