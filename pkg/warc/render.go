package warc

import (
	"bytes"
	"time"
)

// Record types of a rendered page.
const (
	TypeConversion = "conversion"
	TypeMetadata   = "metadata"
)

// NewConversionRecord returns a conversion record: block (of contentType)
// is what the record refersTo (a response record's id) became, such as a
// page's DOM after its scripts ran. Replay tools index no conversion
// records, so that the page replays from its response and resources.
func NewConversionRecord(targetURI string, date time.Time, refersTo, contentType string, block []byte) Record {
	return Record{
		Header: Header{
			{FieldType, TypeConversion},
			{FieldRecordID, NewRecordID()},
			{FieldDate, FormatDate(date)},
			{FieldTargetURI, targetURI},
			{FieldRefersTo, refersTo},
			{FieldContentType, contentType},
			{FieldPayloadDigest, Digest(block)},
		},
		Block: block,
	}
}

// NewMetadataRecord returns a metadata record about the record
// concurrentTo, its fields in application/warc-fields form in the order
// given (pairs of name and value).
func NewMetadataRecord(targetURI string, date time.Time, concurrentTo string, fields ...string) Record {
	var b bytes.Buffer
	for i := 0; i+1 < len(fields); i += 2 {
		b.WriteString(oneLine(fields[i]))
		b.WriteString(": ")
		b.WriteString(oneLine(fields[i+1]))
		b.WriteString("\r\n")
	}
	return Record{
		Header: Header{
			{FieldType, TypeMetadata},
			{FieldRecordID, NewRecordID()},
			{FieldDate, FormatDate(date)},
			{FieldTargetURI, targetURI},
			{FieldConcurrentTo, concurrentTo},
			{FieldContentType, ContentTypeWarcinfo},
		},
		Block: b.Bytes(),
	}
}
