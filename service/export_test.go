package service

// InboxScanning is Inbox reading at most scan rows per source and page, so
// a test can make a source spend its reads with a few rows.
var InboxScanning = (*Service).inbox
