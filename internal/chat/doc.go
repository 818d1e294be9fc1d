// Package chat answers the /sandbox chat command: the text a bot posts
// back when someone in a conversation writes "/sandbox", "/sandbox boost",
// "/sandbox door shared", "/sandbox limits cpus=2 memory=4g" or
// "/sandbox help".
//
// Handle parses one message and calls the service. What a person in the
// conversation can act on (a mode without boosts, a runtime that is not
// running, a bad limit value, a door change while a command runs, an
// unknown word) is a Reply; only failures the person cannot fix from the
// chat (the engine is gone, settings are malformed) and messages that are
// not /sandbox commands at all are errors.
//
// The busy check of "/sandbox door" counts the commands this process runs
// in the conversation's managed runtime, so it exists in the managed
// modes (image:*, gondolin:default, kube:*) only. The other modes keep no
// runtime hutch manages and track nothing: there the door changes at
// once, and a command already running keeps the view it started with.
package chat
