/* (no API: the library acts when it is loaded) */
