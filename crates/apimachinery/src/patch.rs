//! JSON merge patch and JSON patch (being written).
