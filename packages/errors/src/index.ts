export { CkptError, type ErrorKind, kindOf, messageOf, truncateForMessage } from "./errors.js";
