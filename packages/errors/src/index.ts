export {
  CkptError,
  CkptSubjectError,
  type ErrorKind,
  kindOf,
  messageOf,
  truncateForMessage,
} from "./errors.js";
