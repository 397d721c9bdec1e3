#include "idem/record/event_time.hpp"

#include <fmt/format.h>

namespace idem::record {

EventTime event_time(RecordParser& parser, const FieldPath* time_field, const TimeZone* zone) {
    EventTime found;
    if (time_field) {
        auto value = parser.find(*time_field);
        if (!value) {
            found.status = EventTime::Status::missing;
            return found;
        }
        if (value->type == FieldValue::Type::string || value->type == FieldValue::Type::number)
            found.time = parse_timestamp(value->text);
        if (found.time && zone && value->type == FieldValue::Type::string &&
            lacks_utc_offset(value->text))
            found.time = zone->from_local(*found.time);
        found.status = found.time ? EventTime::Status::found : EventTime::Status::malformed;
        return found;
    }
    if (parser.shape() == RecordShape::envelope && !parser.envelope().received_at.empty())
        found.time = parse_timestamp(parser.envelope().received_at);
    found.status = found.time ? EventTime::Status::found : EventTime::Status::none;
    return found;
}

std::string describe_failure(const EventTime& time, const FieldPath& time_field) {
    if (time.status == EventTime::Status::missing)
        return fmt::format("missing time field '{}'", time_field.text());
    return fmt::format("time field '{}' is not a timestamp (RFC 3339, or an epoch number)",
                       time_field.text());
}

} // namespace idem::record
