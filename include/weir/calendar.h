/*
 * weir/calendar.h - calendar periods: a limit counted per day, month or
 * year of a time zone's calendar rather than per window of fixed length.
 */
#ifndef WEIR_CALENDAR_H
#define WEIR_CALENDAR_H

typedef enum weir_calendar {
    WEIR_CALENDAR_NONE = 0,
    WEIR_CALENDAR_DAY = 1,
    WEIR_CALENDAR_MONTH = 2,
    WEIR_CALENDAR_YEAR = 3
} weir_calendar;

#endif /* WEIR_CALENDAR_H */
