export {
  CkptError,
  CkptSubjectError,
  type ErrorKind,
  isAbort,
  kindOf,
  messageOf,
  truncateForMessage,
} from "./errors.js";
export {
  describeRefusal,
  type OpenedRegularFile,
  openRegularFile,
  type RegularFileRefusal,
  readRegularFile,
} from "./regular-file.js";
export {
  describeShortfall,
  freeBytes,
  isNoSpace,
  type SpaceShortfall,
  spaceShortfall,
  describeUnfinishedWrite,
  raiseNoSpace,
} from "./space.js";
