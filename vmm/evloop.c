/* evloop: placeholder until implemented. */
